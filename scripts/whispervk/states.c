// states.c: can N whisper_state objects on ONE whisper_context decode at
// the same time, on whichever backend the context picked (Vulkan when
// -gpu 1 and the library has it, else the CPU)? This is how the Sluice
// engine uses whisper.cpp: one context per loaded model, one state per
// slot, whisper_full_with_state from as many threads as slots. Two
// whisper-cli processes would each have their own device context and
// prove nothing about this.
//
// It decodes K = 4 clips of a 16 kHz mono 16-bit WAV (the whole file and
// three cuts) one after another on state 0: the reference answers. Then,
// for each N of -n (default 1,2,4), N pthreads on states 0..N-1, released
// at once by a barrier: thread i decodes clip (i + r) % K for rounds
// r = 0..ceil(D/N)-1 (D = -d, default 4, so every phase decodes at least D
// clips), and every answer (segment texts and times) must equal the
// reference of its clip, byte for byte. It prints one line per phase
// (flushed, so a crash in a later phase keeps the earlier lines) and exits
// 0 only when every answer matched (1 on a mismatch, 2 on a setup failure;
// a crash is a crash). -out FILE writes the reference answers, so a CPU
// run and a Vulkan run can be compared with cmp.
//
// The libraries are a GGML_BACKEND_DL folder (backends/whisper/shim/
// build.sh, backend vulkan): the backend modules beside them are loaded
// from the folder named by -lib (ggml_backend_load_all_from_path).
// Build (scripts/whisper-vulkan-check.sh does this), on one line:
//   gcc -O2 -Wall -Werror -pthread -I$SRC/include -I$SRC/ggml/include
//       states.c -o whispervk-states -L$LIB -lwhisper -lggml -lggml-base
//       -Wl,-rpath,$LIB
//
// Usage: whispervk-states -lib DIR -m MODEL -f WAV [-gpu 0|1] [-n 1,2,4]
//                         [-d DECODES] [-t THREADS] [-out FILE] [-v]
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "whisper.h"

#define MAX_STATES 16
#define N_CLIPS 4
#define MAX_TEXT (64 * 1024)

struct clip {
	const float *pcm;
	int n;
};

static struct whisper_context *ctx;
static struct clip clips[N_CLIPS];
static char *refs[N_CLIPS];
static int n_threads = 1, rounds = 1;
static pthread_barrier_t start_line;

static void quiet(enum ggml_log_level level, const char *text, void *user) {
	(void)user;
	if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// read_wav returns the samples of a PCM16 mono 16 kHz WAV as floats.
static float *read_wav(const char *path, int *n) {
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	unsigned char h[12];
	float *out = NULL;
	if (fread(h, 1, 12, f) != 12 || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4)) goto done;
	int channels = 0, rate = 0, bits = 0;
	for (;;) {
		unsigned char c[8];
		if (fread(c, 1, 8, f) != 8) goto done;
		uint32_t size = c[4] | c[5] << 8 | c[6] << 16 | (uint32_t)c[7] << 24;
		if (!memcmp(c, "fmt ", 4)) {
			unsigned char fm[16];
			if (size < 16 || fread(fm, 1, 16, f) != 16) goto done;
			channels = fm[2] | fm[3] << 8;
			rate = fm[4] | fm[5] << 8 | fm[6] << 16 | fm[7] << 24;
			bits = fm[14] | fm[15] << 8;
			if (fseek(f, size - 16 + (size & 1), SEEK_CUR)) goto done;
		} else if (!memcmp(c, "data", 4)) {
			if (channels != 1 || rate != 16000 || bits != 16 || size > 64u << 20) goto done;
			int16_t *s = malloc(size);
			if (!s || fread(s, 1, size, f) != size) { free(s); goto done; }
			*n = size / 2;
			out = malloc(sizeof(float) * *n);
			for (int i = 0; out && i < *n; i++) out[i] = s[i] / 32768.0f;
			free(s);
			goto done;
		} else if (fseek(f, size + (size & 1), SEEK_CUR)) {
			goto done;
		}
	}
done:
	fclose(f);
	return out;
}

// decode runs greedy, temperature-0 decoding of one clip on state st and
// returns its answer: every segment's t0, t1 and text.
static char *decode(struct whisper_state *st, const struct clip *c) {
	struct whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
	p.n_threads = n_threads;
	p.language = "en";
	p.temperature = 0.0f;
	p.temperature_inc = 0.0f; // no fallback: one deterministic pass
	p.print_progress = false;
	p.print_realtime = false;
	p.print_timestamps = false;
	p.print_special = false;
	if (whisper_full_with_state(ctx, st, p, c->pcm, c->n) != 0) return NULL;
	char *out = calloc(1, MAX_TEXT);
	size_t used = 0;
	int ns = whisper_full_n_segments_from_state(st);
	for (int i = 0; i < ns && used < MAX_TEXT - 1; i++) {
		int w = snprintf(out + used, MAX_TEXT - used, "[%lld-%lld]%s\n",
				 (long long)whisper_full_get_segment_t0_from_state(st, i),
				 (long long)whisper_full_get_segment_t1_from_state(st, i),
				 whisper_full_get_segment_text_from_state(st, i));
		if (w < 0) break;
		used += (size_t)w;
	}
	return out;
}

struct job {
	int id, matched, failed;
	struct whisper_state *st;
};

static void *worker(void *arg) {
	struct job *j = arg;
	pthread_barrier_wait(&start_line);
	for (int r = 0; r < rounds; r++) {
		int k = (j->id + r) % N_CLIPS;
		char *got = decode(j->st, &clips[k]);
		if (got && !strcmp(got, refs[k])) {
			j->matched++;
		} else {
			j->failed++;
			fprintf(stderr, "state %d round %d clip %d: %s\n", j->id, r, k, got ? "answer differs" : "decode failed");
			if (got) fprintf(stderr, "  want %.120s\n  got  %.120s\n", refs[k], got);
		}
		free(got);
	}
	return NULL;
}

// phase runs n states at once for rounds rounds each and reports them.
static int phase(struct job *jobs, int n) {
	pthread_barrier_init(&start_line, NULL, n);
	pthread_t th[MAX_STATES];
	double t = now();
	for (int i = 0; i < n; i++) {
		jobs[i].matched = jobs[i].failed = 0;
		pthread_create(&th[i], NULL, worker, &jobs[i]);
	}
	int matched = 0, failed = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		matched += jobs[i].matched;
		failed += jobs[i].failed;
	}
	double d = now() - t;
	pthread_barrier_destroy(&start_line);
	printf("concurrent: %d states x %d rounds: %d/%d answers match the sequential ones, %.2f s, %.2f clips/s\n",
	       n, rounds, matched, matched + failed, d, (matched + failed) / d);
	return failed;
}

int main(int argc, char **argv) {
	const char *model = NULL, *wav = NULL, *out = NULL, *counts = "1,2,4", *lib = NULL;
	int gpu = 1, decodes = 4, verbose = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-v")) { verbose = 1; continue; }
		if (!v) { fprintf(stderr, "%s needs a value\n", a); return 2; }
		i++;
		if (!strcmp(a, "-m")) model = v;
		else if (!strcmp(a, "-lib")) lib = v;
		else if (!strcmp(a, "-f")) wav = v;
		else if (!strcmp(a, "-gpu")) gpu = atoi(v);
		else if (!strcmp(a, "-n")) counts = v;
		else if (!strcmp(a, "-d")) decodes = atoi(v);
		else if (!strcmp(a, "-t")) n_threads = atoi(v);
		else if (!strcmp(a, "-out")) out = v;
		else { fprintf(stderr, "unknown flag %s\n", a); return 2; }
	}
	int ns[MAX_STATES], nn = 0, most = 0;
	for (const char *c = counts; *c && nn < MAX_STATES; c = strchr(c, ',') ? strchr(c, ',') + 1 : "") {
		ns[nn] = atoi(c);
		if (ns[nn] < 1 || ns[nn] > MAX_STATES) nn = MAX_STATES + 1;
		else if (ns[nn] > most) most = ns[nn];
		if (nn <= MAX_STATES) nn++;
	}
	if (!lib || !model || !wav || nn < 1 || nn > MAX_STATES || decodes < 1 || n_threads < 1) {
		fprintf(stderr, "usage: %s -lib DIR -m MODEL -f WAV [-gpu 0|1] [-n 1,2,4 (each 1..%d)] [-d DECODES] [-t THREADS] [-out FILE] [-v]\n", argv[0], MAX_STATES);
		return 2;
	}
	if (!verbose) whisper_log_set(quiet, NULL);
	ggml_backend_load_all_from_path(lib);
	if (ggml_backend_dev_count() < 1) { fprintf(stderr, "%s: no ggml backend module loaded\n", lib); return 2; }
	int total = 0;
	float *pcm = read_wav(wav, &total);
	if (!pcm || total < 16000) { fprintf(stderr, "%s: not a 16 kHz mono PCM16 WAV of 1 s or more\n", wav); return 2; }
	// The whole file, its first half, its second half, its middle 60 %.
	clips[0] = (struct clip){pcm, total};
	clips[1] = (struct clip){pcm, total / 2};
	clips[2] = (struct clip){pcm + total / 2, total - total / 2};
	clips[3] = (struct clip){pcm + total / 5, total * 3 / 5};

	struct whisper_context_params cp = whisper_context_default_params();
	cp.use_gpu = gpu != 0;
	cp.flash_attn = false;
	double t = now();
	ctx = whisper_init_from_file_with_params_no_state(model, cp);
	if (!ctx) { fprintf(stderr, "%s: whisper could not load it\n", model); return 2; }
	struct job jobs[MAX_STATES] = {0};
	for (int i = 0; i < most; i++) {
		jobs[i].id = i;
		jobs[i].st = whisper_init_state(ctx);
		if (!jobs[i].st) { fprintf(stderr, "whisper_init_state %d failed\n", i); return 2; }
	}
	printf("load: context + %d states in %.2f s (gpu=%d)\n", most, now() - t, gpu);

	t = now();
	for (int k = 0; k < N_CLIPS; k++) {
		refs[k] = decode(jobs[0].st, &clips[k]);
		if (!refs[k]) { fprintf(stderr, "reference decode of clip %d failed\n", k); return 2; }
	}
	double seq = now() - t;
	double audio_s = 0;
	for (int k = 0; k < N_CLIPS; k++) audio_s += clips[k].n / 16000.0;
	printf("sequential: %d clips (%.1f s of audio) in %.2f s on state 0: %.3f s per clip, %.2f clips/s\n",
	       N_CLIPS, audio_s, seq, seq / N_CLIPS, N_CLIPS / seq);
	if (out) {
		FILE *f = fopen(out, "w");
		for (int k = 0; f && k < N_CLIPS; k++) fprintf(f, "clip %d\n%s", k, refs[k]);
		if (!f || fclose(f)) { fprintf(stderr, "%s: cannot write\n", out); return 2; }
	}

	int failed = 0;
	for (int p = 0; p < nn; p++) {
		rounds = (decodes + ns[p] - 1) / ns[p];
		failed += phase(jobs, ns[p]);
	}
	for (int i = 0; i < most; i++) whisper_free_state(jobs[i].st);
	whisper_free(ctx);
	for (int k = 0; k < N_CLIPS; k++) free(refs[k]);
	free(pcm);
	return failed ? 1 : 0;
}
