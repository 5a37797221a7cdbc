// silero.c: Sluice's shim for Silero VAD v5 on ONNX Runtime. It runs every
// 512-sample window of a request in one call, so the Go side makes one
// native call per request instead of one per window (the Go scheduler
// retakes the P of a goroutine in a native call; thousands of short calls
// a second cost a thread hand-off each). It does exactly what the Go loop
// in backends/onnx/silero.go (silero.window) does, in the same order on
// the same buffers, so the probabilities are bit-identical.
//
// Built by build.sh beside it (Debian gcc, no ONNX Runtime headers: the Go
// side passes OrtApi's Run function pointer and owns every ORT object).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SILERO_WINDOW 512
#define SILERO_CONTEXT 64
#define SILERO_STATE 256

typedef struct OrtStatus OrtStatus;
typedef OrtStatus *(*ort_run_fn)(void *session, void *run_options, const char *const *input_names,
				 void *const *inputs, size_t n_inputs, const char *const *output_names,
				 size_t n_outputs, void **outputs);

// sluice_silero is filled by the Go side once per session (silero.go's
// shimState has the same layout: eleven 8-byte fields).
struct sluice_silero {
	ort_run_fn run;
	void *session;
	void *run_options;
	const char *const *input_names; // input, state, sr
	const char *const *output_names; // output, stateN
	void **values; // OrtValue*[5]: the 3 inputs, then the 2 outputs
	float *in; // [64 + 512], bound to values[0]
	float *state; // [256], bound to values[1]
	const float *prob; // [1], bound to values[3]
	const float *state_out; // [256], bound to values[4]
	int64_t done; // windows finished by the current call (read by tests)
};

// sluice_silero_abi lets the loader check the library matches its layout.
int32_t sluice_silero_abi(void) { return (int32_t)sizeof(struct sluice_silero); }

// sluice_silero_run runs the windows of samples[0:n] (16 kHz, the last
// window zero-padded) after the context and state already in s's buffers,
// writing one probability per window to probs. It stops at the first
// failed Run (a terminated run options' Run fails: that is cancellation)
// and returns its status, s->done telling how many windows finished; NULL
// when all did. No allocation.
OrtStatus *sluice_silero_run(struct sluice_silero *s, const float *samples, int64_t n, float *probs) {
	float *in = s->in;
	int64_t windows = (n + SILERO_WINDOW - 1) / SILERO_WINDOW;
	__atomic_store_n(&s->done, 0, __ATOMIC_RELEASE);
	for (int64_t i = 0; i < windows; i++) {
		int64_t off = i * SILERO_WINDOW;
		int64_t m = n - off < SILERO_WINDOW ? n - off : SILERO_WINDOW;
		// the last 64 samples of the previous window become the context
		memmove(in, in + SILERO_WINDOW, SILERO_CONTEXT * sizeof(float));
		memcpy(in + SILERO_CONTEXT, samples + off, (size_t)m * sizeof(float));
		if (m < SILERO_WINDOW) memset(in + SILERO_CONTEXT + m, 0, (size_t)(SILERO_WINDOW - m) * sizeof(float));
		OrtStatus *st = s->run(s->session, s->run_options, s->input_names, s->values, 3, s->output_names, 2,
				       s->values + 3);
		if (st != NULL) return st;
		memcpy(s->state, s->state_out, SILERO_STATE * sizeof(float));
		probs[i] = *s->prob;
		__atomic_store_n(&s->done, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}
