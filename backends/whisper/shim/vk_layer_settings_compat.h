// vk_layer_settings_compat.h: the one piece of Vulkan-Headers that ggml's
// Vulkan backend in whisper.cpp 1.9.1 uses and Debian bookworm's
// libvulkan-dev 1.3.239 lacks: VK_EXT_layer_settings (Vulkan-Headers
// 1.3.272 and later). ggml_vk_instance_init (ggml-vulkan.cpp) always builds
// a vk::LayerSettingsCreateInfoEXT and chains it into
// vk::InstanceCreateInfo's pNext, whether or not the validation layer is on
// (it is only with GGML_VULKAN_VALIDATE), so g++ stops with
// "'LayerSettingEXT' is not a member of 'vk'".
//
// backends/whisper/shim/build.sh (backend vulkan) force-includes this header into the C++
// compiles (-include) only when /usr/include/vulkan/vulkan_core.h lacks
// VK_EXT_layer_settings. It declares the three names in namespace vk with
// the layout of their C structs (VkLayerSettingEXT,
// VkLayerSettingsCreateInfoEXT, sType 1000496000), so the instance gets
// the same pNext chain as a build against newer headers; a loader or
// driver that does not know the structure skips it, as the Vulkan spec
// lets them skip unknown pNext structures of an instance create info.
// It includes nothing of Vulkan: namespace vk is opened again by
// vulkan.hpp afterwards, which declares none of these names.
#ifndef SLUICE_VK_LAYER_SETTINGS_COMPAT_H
#define SLUICE_VK_LAYER_SETTINGS_COMPAT_H
#ifdef __cplusplus
#include <cstdint>
#include <vector>

namespace vk {

// LayerSettingTypeEXT is VkLayerSettingTypeEXT.
enum class LayerSettingTypeEXT : int32_t {
	eBool32 = 0,
	eInt32 = 1,
	eInt64 = 2,
	eUint32 = 3,
	eUint64 = 4,
	eFloat32 = 5,
	eFloat64 = 6,
	eString = 7,
};

// LayerSettingEXT is VkLayerSettingEXT.
struct LayerSettingEXT {
	const char *pLayerName;
	const char *pSettingName;
	LayerSettingTypeEXT type;
	uint32_t valueCount;
	const void *pValues;
};

// LayerSettingsCreateInfoEXT is VkLayerSettingsCreateInfoEXT.
struct LayerSettingsCreateInfoEXT {
	explicit LayerSettingsCreateInfoEXT(const std::vector<LayerSettingEXT> &settings)
	    : settingCount(static_cast<uint32_t>(settings.size())), pSettings(settings.data()) {}
	int32_t sType = 1000496000; // VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT
	const void *pNext = nullptr;
	uint32_t settingCount;
	const LayerSettingEXT *pSettings;
};

} // namespace vk
#endif
#endif
