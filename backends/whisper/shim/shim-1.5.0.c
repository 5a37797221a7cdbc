// shim.c: Sluice's own C shim, compiled into libwhisper.so beside
// whisper.cpp 1.5.0 (build.sh). purego cannot pass whisper_full_params by
// value (it is far above the size purego passes in registers), nor return
// whisper_token_data, so these functions take and give plain pointers.
// The abort callback reads a flag in C memory that Go sets atomically: no
// Go callback runs on whisper's threads.
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "whisper.h"

// sluice_req is what Go fills in for one whisper_full_with_state call.
// Keep its layout in step with backends/whisper/lib.go (cReq).
struct sluice_req {
    int32_t n_threads;
    int32_t translate;
    int32_t token_timestamps;
    int32_t detect_language;   // 1: language is ignored, whisper detects it
    const char *language;      // ISO-639-1 code, or NULL with detect_language
    const char *initial_prompt; // may be NULL
    float temperature;
    float temperature_inc;     // 0: no fallback (deterministic greedy)
    int32_t beam_size;         // 0 or 1: greedy
    int32_t max_len;           // 0: no limit
    _Atomic int32_t *abort;    // non-zero: stop at the next graph node
    _Atomic int64_t *polls;    // counts abort polls
    int32_t notify_fd;         // >= 0: one byte is written here at the first poll (decoding has begun)
    int32_t pad;
};

static bool sluice_abort(void *data) {
    struct sluice_req *r = data;
    bool stop = r->abort && atomic_load_explicit(r->abort, memory_order_relaxed) != 0;
    // The notification comes after the flag is read, so a cancel it
    // prompts lands in the work before the next poll: "mid-decode".
    if (r->polls && atomic_fetch_add_explicit(r->polls, 1, memory_order_relaxed) == 0 && r->notify_fd >= 0) {
        char b = 1;
        ssize_t n = write(r->notify_fd, &b, 1);
        (void) n;
    }
    return stop;
}

static bool sluice_encoder_begin(struct whisper_context *ctx, struct whisper_state *state, void *data) {
    (void) ctx;
    (void) state;
    return !sluice_abort(data);
}

int sluice_whisper_full(struct whisper_context *ctx, struct whisper_state *state,
                        struct sluice_req *r, const float *samples, int n_samples) {
    enum whisper_sampling_strategy strat = r->beam_size > 1 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY;
    struct whisper_full_params p = whisper_full_default_params(strat);
    p.n_threads = r->n_threads;
    p.translate = r->translate != 0;
    p.no_context = true;       // every request stands alone
    p.print_special = false;
    p.print_progress = false;
    p.print_realtime = false;
    p.print_timestamps = false;
    p.token_timestamps = r->token_timestamps != 0;
    p.max_len = r->max_len;
    p.language = r->detect_language ? "auto" : r->language;
    p.detect_language = false; // "auto" detects, then transcribes
    p.initial_prompt = r->initial_prompt;
    p.temperature = r->temperature;
    p.temperature_inc = r->temperature_inc;
    if (r->beam_size > 1) {
        p.beam_search.beam_size = r->beam_size;
    }
    p.abort_callback = sluice_abort;
    p.abort_callback_user_data = r;
    p.encoder_begin_callback = sluice_encoder_begin;
    p.encoder_begin_callback_user_data = r;
    return whisper_full_with_state(ctx, state, p, samples, n_samples);
}

struct whisper_context *sluice_whisper_load(const char *path, int32_t use_gpu) {
    struct whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = use_gpu != 0;
    return whisper_init_from_file_with_params_no_state(path, cp);
}

// sluice_whisper_token reports token i of segment seg: its id, and its
// times (10 ms units, token_timestamps) into t; it returns 1 for a text
// token, 0 for a special one (end of text, timestamps, language tags).
int32_t sluice_whisper_token(struct whisper_context *ctx, struct whisper_state *state,
                             int32_t seg, int32_t i, int64_t *t) {
    whisper_token_data d = whisper_full_get_token_data_from_state(state, seg, i);
    t[0] = d.t0;
    t[1] = d.t1;
    return d.id < whisper_token_eot(ctx) ? 1 : 0;
}

// Logging: whisper.cpp logs through one process-wide callback. The shim
// keeps the last error line (the reason a model failed to load) and drops
// the rest, so the library never writes to the server's stderr.
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];

static void sluice_log(enum ggml_log_level level, const char *text, void *data) {
    (void) data;
    if (level != GGML_LOG_LEVEL_ERROR || text == NULL) {
        return;
    }
    pthread_mutex_lock(&log_mu);
    snprintf(last_error, sizeof last_error, "%s", text);
    size_t n = strlen(last_error);
    while (n > 0 && (last_error[n - 1] == '\n' || last_error[n - 1] == ' ')) {
        last_error[--n] = 0;
    }
    pthread_mutex_unlock(&log_mu);
}

void sluice_whisper_quiet(void) {
    whisper_log_set(sluice_log, NULL);
}

// sluice_whisper_last_error copies the last error line into buf (n bytes)
// and clears it.
void sluice_whisper_last_error(char *buf, int32_t n) {
    pthread_mutex_lock(&log_mu);
    snprintf(buf, (size_t) n, "%s", last_error);
    last_error[0] = 0;
    pthread_mutex_unlock(&log_mu);
}

// sluice_whisper_backend names the compute path this library was built
// with (build.sh's SLUICE_WHISPER_BACKEND).
const char *sluice_whisper_backend(void) {
#if defined(GGML_USE_CLBLAST)
    return "opencl";
#elif defined(GGML_USE_CUBLAS)
    return "cuda";
#else
    return "cpu";
#endif
}
