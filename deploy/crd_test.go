package deploy

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Minimal strict types of the custom resources whose Go modules are not
// reasonable dependencies: KEDA's (github.com/kedacore/keda/v2 v2.21.0 is
// served, but it is the whole operator: its go.mod requires 358 modules,
// every scaler's cloud SDK among them, and its API package imports
// controller-runtime) and KServe's (github.com/kserve/kserve, which the
// module proxy does not serve here: 403). Each mirrors the fields of
// the published CRD (keda.sh/v1alpha1 ScaledObject, serving.kserve.io
// v1alpha1 ServingRuntime and v1beta1 InferenceService) that these
// manifests use, with their JSON names and types; decoding is strict, so
// a field outside them (a typo, or one these types do not know) fails the
// test rather than passing unchecked.

type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		PollingInterval *int32 `json:"pollingInterval"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

type modelFormat struct {
	Name       string `json:"name"`
	Version    string `json:"version,omitempty"`
	AutoSelect *bool  `json:"autoSelect,omitempty"`
}

type servingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SupportedModelFormats []modelFormat      `json:"supportedModelFormats"`
		ProtocolVersions      []string           `json:"protocolVersions"`
		MultiModel            *bool              `json:"multiModel"`
		Containers            []corev1.Container `json:"containers"`
		Volumes               []corev1.Volume    `json:"volumes"`
	} `json:"spec"`
}

type inferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Predictor struct {
			MinReplicas                   *int32 `json:"minReplicas"`
			MaxReplicas                   int32  `json:"maxReplicas"`
			TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
			Model                         struct {
				Runtime         string      `json:"runtime"`
				ProtocolVersion string      `json:"protocolVersion"`
				ModelFormat     modelFormat `json:"modelFormat"`
			} `json:"model"`
		} `json:"predictor"`
	} `json:"spec"`
}

// adapterRules is prometheus-adapter's configuration (its rules).
type adapterRules struct {
	Rules []adapterRule `json:"rules"`
}

type adapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Resource string `json:"resource"`
		} `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}
