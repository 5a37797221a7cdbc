// shim.c: Sluice's own C shim over whisper.cpp 1.9.1, built as
// libsluice_whisper.so beside libwhisper (build.sh). purego cannot pass
// whisper_full_params or whisper_context_params by value (far above the
// size purego passes in registers), nor return whisper_token_data, so
// these functions take and give plain pointers.
// The abort callback reads a flag in C memory that Go sets atomically: no
// Go callback runs on whisper's threads. New segments go to a pipe that Go
// reads (streaming), for the same reason.
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "whisper.h"

// sluice_req is what Go fills in for one whisper_full_with_state call.
// Keep its layout in step with backends/whisper/lib.go (cReq).
struct sluice_req {
    int32_t n_threads;
    int32_t translate;
    int32_t token_timestamps;
    int32_t detect_language;    // 1: language is ignored, whisper detects it
    const char *language;       // ISO-639-1 code, or NULL with detect_language
    const char *initial_prompt; // may be NULL
    float temperature;
    float temperature_inc;      // 0: no fallback (deterministic greedy)
    int32_t beam_size;          // 0 or 1: greedy
    int32_t max_len;            // 0: no limit
    _Atomic int32_t *abort;     // non-zero: stop at the next graph node
    _Atomic int64_t *polls;     // counts abort polls
    int32_t notify_fd;          // >= 0: one byte is written here at the first poll (decoding has begun)
    int32_t segment_fd;         // >= 0: each new segment is written here as it is produced
    int32_t ack_fd;             // with segment_fd: one byte is read here after each segment (the reader has it)
    int32_t best_of;            // greedy decoders when temperature > 0
    int32_t out_lang_id;        // out: the detected language (detect_language), else -1
    float out_lang_prob;        // out: its probability
};

// sluice_whisper_set_abort is build.sh's addition to whisper.cpp: the
// abort callback its scheduled graphs give their backends, for the
// calling thread.
void sluice_whisper_set_abort(ggml_abort_callback cb, void *data);

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

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return; // the reader is gone: the request ends anyway
        }
        p += w;
        n -= (size_t) w;
    }
}

// sluice_new_segment writes each new segment as a record: int32 index,
// int64 t0, int64 t1 (10 ms units), int32 length, then the text bytes.
static void sluice_new_segment(struct whisper_context *ctx, struct whisper_state *state, int n_new, void *data) {
    (void) ctx;
    struct sluice_req *r = data;
    if (r->segment_fd < 0) {
        return;
    }
    int n = whisper_full_n_segments_from_state(state);
    for (int i = n - n_new; i < n; i++) {
        const char *text = whisper_full_get_segment_text_from_state(state, i);
        size_t len = text ? strlen(text) : 0;
        char head[24];
        int32_t idx = i, l = (int32_t) len;
        int64_t t0 = whisper_full_get_segment_t0_from_state(state, i);
        int64_t t1 = whisper_full_get_segment_t1_from_state(state, i);
        memcpy(head, &idx, 4);
        memcpy(head + 4, &t0, 8);
        memcpy(head + 12, &t1, 8);
        memcpy(head + 20, &l, 4);
        write_all(r->segment_fd, head, sizeof head);
        write_all(r->segment_fd, text, len);
        // Wait until the reader has the segment: the client gets it before
        // the next window is decoded.
        char ack;
        ssize_t got;
        do {
            got = read(r->ack_fd, &ack, 1);
        } while (got < 0 && errno == EINTR);
    }
}

int sluice_whisper_full(struct whisper_context *ctx, struct whisper_state *state,
                        struct sluice_req *r, const float *samples, int n_samples) {
    enum whisper_sampling_strategy strat = r->beam_size > 1 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY;
    struct whisper_full_params p = whisper_full_default_params(strat);
    p.n_threads = r->n_threads;
    p.translate = r->translate != 0;
    p.no_context = true; // every request stands alone
    p.print_special = false;
    p.print_progress = false;
    p.print_realtime = false;
    p.print_timestamps = false;
    p.token_timestamps = r->token_timestamps != 0;
    p.max_len = r->max_len;
    p.initial_prompt = r->initial_prompt;
    p.temperature = r->temperature;
    p.temperature_inc = r->temperature_inc;
    if (r->best_of > 0) {
        p.greedy.best_of = r->best_of;
    }
    if (r->beam_size > 1) {
        p.beam_search.beam_size = r->beam_size;
    }
    p.abort_callback = sluice_abort;
    p.abort_callback_user_data = r;
    p.encoder_begin_callback = sluice_encoder_begin;
    p.encoder_begin_callback_user_data = r;
    p.new_segment_callback = sluice_new_segment;
    p.new_segment_callback_user_data = r;
    r->out_lang_id = -1;
    p.language = r->language;
    // Every graph of this call polls the abort flag between nodes.
    sluice_whisper_set_abort(sluice_abort, r);
    p.detect_language = false;
    if (r->detect_language) {
        // Detected here rather than inside whisper_full, which keeps the
        // language's probability to itself: the mel of the first window,
        // one encoder pass, the language tokens' probabilities.
        if (whisper_pcm_to_mel_with_state(ctx, state, samples, n_samples, r->n_threads) != 0) {
            sluice_whisper_set_abort(NULL, NULL);
            return -2;
        }
        int nl = whisper_lang_max_id() + 1;
        float *probs = calloc((size_t) nl, sizeof(float));
        if (probs == NULL) {
            sluice_whisper_set_abort(NULL, NULL);
            return -5;
        }
        int id = whisper_lang_auto_detect_with_state(ctx, state, 0, r->n_threads, probs);
        if (id < 0 || id >= nl) {
            free(probs);
            sluice_whisper_set_abort(NULL, NULL);
            return -3;
        }
        r->out_lang_id = id;
        r->out_lang_prob = probs[id];
        free(probs);
        p.language = whisper_lang_str(id);
    }
    int rc = whisper_full_with_state(ctx, state, p, samples, n_samples);
    sluice_whisper_set_abort(NULL, NULL);
    return rc;
}

// sluice_load_params are the context parameters Go chooses.
struct sluice_load_params {
    int32_t use_gpu;
    int32_t flash_attn;
    int32_t dtw_preset;   // enum whisper_alignment_heads_preset; 0: no DTW
    int32_t dtw_n_top;    // WHISPER_AHEADS_N_TOP_MOST: the top text layers whose heads align
    int32_t dtw_n_heads;  // WHISPER_AHEADS_CUSTOM: heads (layer, head) pairs in dtw_heads
    int32_t pad;
    const int32_t *dtw_heads;
};

struct whisper_context *sluice_whisper_load(const char *path, const struct sluice_load_params *lp) {
    struct whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = lp->use_gpu != 0;
    cp.flash_attn = lp->flash_attn != 0;
    static whisper_ahead heads[64];
    if (lp->dtw_preset != 0) {
        cp.dtw_token_timestamps = true;
        cp.flash_attn = false; // whisper.cpp 1.9.1 disables DTW under flash attention
        cp.dtw_aheads_preset = (enum whisper_alignment_heads_preset) lp->dtw_preset;
        cp.dtw_n_top = lp->dtw_n_top;
        if (lp->dtw_preset == WHISPER_AHEADS_CUSTOM) {
            // whisper copies the heads while it loads (loads are serialised
            // by the Go side), so one static table serves every load.
            int n = lp->dtw_n_heads < 64 ? lp->dtw_n_heads : 64;
            for (int i = 0; i < n; i++) {
                heads[i].n_text_layer = lp->dtw_heads[2 * i];
                heads[i].n_head = lp->dtw_heads[2 * i + 1];
            }
            cp.dtw_aheads.n_heads = (size_t) n;
            cp.dtw_aheads.heads = heads;
        }
    }
    return whisper_init_from_file_with_params_no_state(path, cp);
}

// sluice_whisper_token reports token i of segment seg: its times (10 ms
// units: t0, t1 from token timestamps, then t_dtw, -1 without DTW) into
// t; it returns 1 for a text token, 0 for a special one (end of text,
// timestamps, language tags).
int32_t sluice_whisper_token(struct whisper_context *ctx, struct whisper_state *state,
                             int32_t seg, int32_t i, int64_t *t) {
    whisper_token_data d = whisper_full_get_token_data_from_state(state, seg, i);
    t[0] = d.t0;
    t[1] = d.t1;
    t[2] = d.t_dtw;
    return d.id < whisper_token_eot(ctx) ? 1 : 0;
}

// Logging: whisper.cpp and ggml log through process-wide callbacks. The
// shim keeps the last error line (the reason a model failed to load) and
// drops the rest, so the libraries never write to the server's stderr.
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

static char backend_name[128] = "cpu";

// sluice_whisper_init silences the libraries' logs and loads ggml's
// backend modules from dir (the build folder): the best CPU variant this
// CPU runs (ggml scores each libggml-cpu-*.so against cpuid), and the GPU
// module the folder has, if any. It returns the number of devices.
int32_t sluice_whisper_init(const char *dir) {
    whisper_log_set(sluice_log, NULL);
    ggml_log_set(sluice_log, NULL);
    ggml_backend_load_all_from_path(dir);
    backend_name[0] = 0;
    for (size_t i = 0; i < ggml_backend_reg_count(); i++) {
        const char *n = ggml_backend_reg_name(ggml_backend_reg_get(i));
        size_t have = strlen(backend_name);
        snprintf(backend_name + have, sizeof backend_name - have, "%s%s", have ? "," : "", n);
    }
    return (int32_t) ggml_backend_dev_count();
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

// sluice_whisper_backend names the ggml backends loaded (for example
// "CPU" or "Vulkan,CPU").
const char *sluice_whisper_backend(void) {
    return backend_name;
}

// sluice_whisper_version is the whisper.cpp version of the build.
const char *sluice_whisper_version(void) {
    return whisper_version();
}
