// vadspeed.c: the cost of whisper.cpp 1.9.1's built-in Silero VAD
// (whisper_vad_detect_speech), for docs/design.md "Whisper's VAD filter".
// No ggml Silero file is obtainable here (whisper.cpp converts it from the
// PyTorch package), so this writes one in whisper.cpp's VAD layout (the
// header of models/convert-silero-vad-to-ggml.py: Silero v5.1.2, window
// 512, context 64, encoder 129-128-64-64-128 with kernels of 3, LSTM 128,
// final conv 128 to 1) with every weight zero: the graph and its cost per
// window are the real model's, only its answers are meaningless. It then
// times whisper_vad_detect_speech over the same audio -n times (wall and
// CPU seconds), on the CPU backend, with 1 thread, which
// backends/whisper/cmd/whisper-vadcheck -vad-only compares with Sluice's
// ONNX Runtime session on the same audio.
//
//   vadspeed -lib DIR -seconds S [-n N]
//
// The audio is S seconds of a deterministic 16 kHz signal (the VAD's cost
// does not depend on the samples). Build (make bench-whisper-vad does):
//   gcc -O2 -Wall -I$SRC/include -I$SRC/ggml/include vadspeed.c
//       -o vadspeed -L$LIB -l:libwhisper.so.1 -l:libggml.so.0
//       -l:libggml-base.so.0 -Wl,-rpath,$LIB
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "whisper.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
	(void) level;
	(void) text;
	(void) user;
}

static void w32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }

// tensor writes one zero tensor: ne (up to 3 dims), f16 (type 1) or f32 (0).
static void tensor(FILE *f, const char *name, int ftype, int n_dims, int32_t ne0, int32_t ne1, int32_t ne2) {
	int32_t ne[3] = {ne0, ne1, ne2};
	w32(f, n_dims);
	w32(f, (int32_t) strlen(name));
	w32(f, ftype);
	size_t n = 1;
	for (int i = 0; i < n_dims; i++) {
		w32(f, ne[i]);
		n *= (size_t) ne[i];
	}
	fwrite(name, 1, strlen(name), f);
	size_t bytes = n * (ftype == 1 ? 2 : 4);
	char *zero = calloc(1, bytes);
	fwrite(zero, 1, bytes, f);
	free(zero);
}

static int write_model(const char *path) {
	FILE *f = fopen(path, "wb");
	if (!f) return -1;
	w32(f, 0x67676d6c);
	const char *type = "silero-16k";
	w32(f, (int32_t) strlen(type));
	fwrite(type, 1, strlen(type), f);
	w32(f, 5), w32(f, 1), w32(f, 2);   // version
	w32(f, 512), w32(f, 64);           // window, context
	w32(f, 4);                         // encoder layers
	int32_t in[4] = {129, 128, 64, 64}, out[4] = {128, 64, 64, 128};
	for (int i = 0; i < 4; i++) w32(f, in[i]), w32(f, out[i]), w32(f, 3);
	w32(f, 128), w32(f, 128), w32(f, 128), w32(f, 1); // LSTM in, hidden; final conv in, out
	tensor(f, "_model.stft.forward_basis_buffer", 1, 3, 256, 1, 258);
	char name[64];
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof name, "_model.encoder.%d.reparam_conv.weight", i);
		tensor(f, name, 1, 3, 3, in[i], out[i]);
		snprintf(name, sizeof name, "_model.encoder.%d.reparam_conv.bias", i);
		tensor(f, name, 0, 1, out[i], 1, 1);
	}
	tensor(f, "_model.decoder.rnn.weight_ih", 0, 2, 128, 512, 1);
	tensor(f, "_model.decoder.rnn.weight_hh", 0, 2, 128, 512, 1);
	tensor(f, "_model.decoder.rnn.bias_ih", 0, 1, 512, 1, 1);
	tensor(f, "_model.decoder.rnn.bias_hh", 0, 1, 512, 1, 1);
	tensor(f, "_model.decoder.decoder.2.weight", 1, 2, 128, 1, 1);
	tensor(f, "_model.decoder.decoder.2.bias", 0, 1, 1, 1, 1);
	return fclose(f);
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
	const char *lib = NULL;
	int seconds = 60, n = 3;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-lib")) lib = argv[i + 1];
		else if (!strcmp(argv[i], "-seconds")) seconds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
	}
	if (!lib || seconds < 1 || n < 1) {
		fprintf(stderr, "usage: %s -lib DIR -seconds S [-n N]\n", argv[0]);
		return 2;
	}
	whisper_log_set(quiet, NULL);
	ggml_log_set(quiet, NULL);
	ggml_backend_load_all_from_path(lib);
	char path[] = "/tmp/vadspeed-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || close(fd) != 0 || write_model(path) != 0) {
		fprintf(stderr, "cannot write the model\n");
		return 2;
	}
	struct whisper_vad_context_params p = whisper_vad_default_context_params();
	p.n_threads = 1;
	p.use_gpu = false;
	struct whisper_vad_context *v = whisper_vad_init_from_file_with_params(path, p);
	unlink(path);
	if (!v) {
		fprintf(stderr, "whisper_vad_init_from_file_with_params failed\n");
		return 2;
	}
	int ns = seconds * 16000;
	float *x = malloc(sizeof(float) * (size_t) ns);
	for (int i = 0; i < ns; i++) x[i] = 0.1f * sinf((float) i * 0.05f);
	double w = 0, c = 0;
	for (int k = 0; k < n; k++) {
		double w0 = now(), c0 = cpu();
		if (!whisper_vad_detect_speech(v, x, ns)) {
			fprintf(stderr, "whisper_vad_detect_speech failed\n");
			return 1;
		}
		w += now() - w0, c += cpu() - c0;
	}
	printf("whisper.cpp built-in VAD (zero weights, real graph), %d s of audio, 1 thread: %.3f s wall, %.3f s CPU per pass (%d passes)\n",
	       seconds, w / n, c / n, n);
	whisper_vad_free(v);
	free(x);
	return 0;
}
