// av.c: Sluice's flat API over Debian's FFmpeg libraries (libavformat,
// libavcodec, libswresample 5.1), loaded with purego by backends/audio/av.
// It exists because FFmpeg's API is struct fields, not calls: Go sees only
// the small public structs below (mirrored in av.go) and these functions.
//
// Decoding: sluice_av_open parses a container from the caller's pread
// callback (no file, no protocol: io_open is refused) with the demuxer the
// caller names (matroska, mov or ADTS, never probed), and reports the chosen
// audio track's codec, channels, rate and stated duration before any
// packet is decoded; sluice_av_start opens the decoder (opus, vorbis or
// aac only, by name); each sluice_av_next reads at most one packet and
// converts what it decodes to mono PCM16 at the requested rate (channels
// averaged, libswresample), so the caller bounds the work and checks its
// context between calls. An interrupt flag the caller sets stops any
// blocking demuxer work.
//
// Encoding: sluice_av_enc_* encode interleaved PCM16 with a named encoder
// into a named muxer's container in bounded memory, chunk by chunk.
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <stdint.h>
#include <string.h>

// Error kinds (the Go side maps them).
enum {
	SLUICE_AV_OK = 0,
	SLUICE_AV_DAMAGED = 1,  // unreadable, truncated or undecodable data
	SLUICE_AV_NO_AUDIO = 2, // no audio track
	SLUICE_AV_CODEC = 3,    // a codec this shim does not decode
	SLUICE_AV_BOUNDS = 4,   // decoded frames beyond the caller's bounds
	SLUICE_AV_STOPPED = 5,  // the caller's stop flag
	SLUICE_AV_INTERNAL = 6, // out of memory or a library failure
};

typedef int64_t (*sluice_av_pread)(uint64_t user, uint8_t *buf, int64_t n, int64_t off);

// struct sluice_av_pub is what Go reads and writes (av.go's decPub).
struct sluice_av_pub {
	int32_t kind;         // error kind, SLUICE_AV_OK when none
	int32_t codec;        // AVCodecID of the audio track
	int32_t channels;     // as the header states
	int32_t rate;         // as the header states
	int64_t duration_us;  // stated duration, -1 when unknown
	int32_t audio_tracks; // audio tracks in the file
	int32_t stop;         // set by Go (atomically) to stop
	int32_t eof;          // set when everything is decoded
	int32_t out_channels; // the last decoded frame's channels
	int32_t out_in_rate;  // the last decoded frame's rate
	int32_t pad;
	int16_t *out;         // after sluice_av_next: out_len samples
	int64_t out_len;
	int64_t packets;      // packets sent to the decoder
	int32_t streams;      // tracks of any kind in the file
	int32_t track_duration; // duration_us is the audio track's own, not the file's
	char codec_name[32];  // FFmpeg's name of the audio track's codec
	char err[256];
};

struct sluice_av_dec {
	struct sluice_av_pub pub;
	sluice_av_pread rd;
	uint64_t user;
	int64_t size, pos;
	AVIOContext *pb;
	AVFormatContext *fmt;
	AVCodecContext *dec;
	AVPacket *pkt;
	AVFrame *frame;
	SwrContext *swr;
	int stream;
	int out_rate;
	int max_channels, max_rate, max_total;
	int draining;
	int64_t out_cap;
	AVChannelLayout swr_layout;
	int swr_rate, swr_fmt;
};

int32_t sluice_av_abi(void) { return (int32_t)sizeof(struct sluice_av_pub); }

void sluice_av_init(void) { av_log_set_level(AV_LOG_QUIET); }

static void fail(struct sluice_av_pub *p, int kind, const char *what, int code) {
	if (p->kind != SLUICE_AV_OK) return;
	p->kind = kind;
	char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
	if (code) {
		av_strerror(code, msg, sizeof msg);
		snprintf(p->err, sizeof p->err, "%s: %s", what, msg);
	} else {
		snprintf(p->err, sizeof p->err, "%s", what);
	}
}

static int read_cb(void *opaque, uint8_t *buf, int n) {
	struct sluice_av_dec *d = opaque;
	if (__atomic_load_n(&d->pub.stop, __ATOMIC_RELAXED)) return AVERROR_EXIT;
	if (d->pos >= d->size) return AVERROR_EOF;
	int64_t want = d->size - d->pos < n ? d->size - d->pos : n;
	int64_t got = d->rd(d->user, buf, want, d->pos);
	if (got < 0) return AVERROR(EIO);
	if (got == 0) return AVERROR_EOF;
	d->pos += got;
	return (int)got;
}

static int64_t seek_cb(void *opaque, int64_t off, int whence) {
	struct sluice_av_dec *d = opaque;
	int64_t p;
	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE: return d->size;
	case SEEK_SET: p = off; break;
	case SEEK_CUR: p = d->pos + off; break;
	case SEEK_END: p = d->size + off; break;
	default: return AVERROR(EINVAL);
	}
	if (p < 0 || p > d->size) return AVERROR(EINVAL);
	d->pos = p;
	return p;
}

static int interrupt_cb(void *opaque) {
	struct sluice_av_dec *d = opaque;
	return __atomic_load_n(&d->pub.stop, __ATOMIC_RELAXED) != 0;
}

// No demuxer may open another resource (a mov data reference, a playlist).
static int deny_io_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags, AVDictionary **options) {
	(void)s; (void)pb; (void)url; (void)flags; (void)options;
	return AVERROR(EPERM);
}

// sluice_av_open parses the header of the size-byte file read through rd
// with demuxer (1: matroska/webm, 2: mov/mp4/m4a, 3: ADTS AAC). It returns NULL only
// when out of memory; otherwise pub.kind says whether it failed.
struct sluice_av_dec *sluice_av_open(sluice_av_pread rd, uint64_t user, int64_t size, int32_t demuxer) {
	struct sluice_av_dec *d = av_mallocz(sizeof *d);
	if (!d) return NULL;
	d->rd = rd, d->user = user, d->size = size, d->stream = -1;
	d->pub.duration_us = -1;
	const char *name = demuxer == 1 ? "matroska" : demuxer == 2 ? "mov" : demuxer == 3 ? "aac" : NULL;
	const AVInputFormat *ifmt = name ? av_find_input_format(name) : NULL;
	if (!ifmt) {
		fail(&d->pub, SLUICE_AV_INTERNAL, "no such demuxer", 0);
		return d;
	}
	uint8_t *buf = av_malloc(32768);
	d->fmt = avformat_alloc_context();
	if (buf) d->pb = avio_alloc_context(buf, 32768, 0, d, read_cb, NULL, seek_cb);
	if (!buf || !d->fmt || !d->pb) {
		if (!d->pb) av_free(buf);
		fail(&d->pub, SLUICE_AV_INTERNAL, "out of memory", 0);
		return d;
	}
	d->fmt->pb = d->pb;
	d->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
	d->fmt->interrupt_callback.callback = interrupt_cb;
	d->fmt->interrupt_callback.opaque = d;
	d->fmt->io_open = deny_io_open;
	d->fmt->max_streams = 64;
	d->fmt->format_whitelist = av_strdup("matroska,webm,mov,mp4,m4a,3gp,3g2,mj2,aac");
	d->fmt->codec_whitelist = av_strdup("opus,vorbis,aac");
	int rc = avformat_open_input(&d->fmt, NULL, ifmt, NULL);
	if (rc < 0) {
		d->fmt = NULL; // freed by avformat_open_input
		fail(&d->pub, rc == AVERROR_EXIT ? SLUICE_AV_STOPPED : SLUICE_AV_DAMAGED, "reading the container", rc);
		return d;
	}
	for (unsigned i = 0; i < d->fmt->nb_streams; i++) {
		AVStream *st = d->fmt->streams[i];
		st->discard = AVDISCARD_ALL;
		if (st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
			d->pub.audio_tracks++;
			if (d->stream < 0) d->stream = (int)i;
		}
	}
	if (d->stream < 0) {
		fail(&d->pub, SLUICE_AV_NO_AUDIO, "no audio track", 0);
		return d;
	}
	AVStream *st = d->fmt->streams[d->stream];
	st->discard = AVDISCARD_DEFAULT;
	d->pub.codec = st->codecpar->codec_id;
	snprintf(d->pub.codec_name, sizeof d->pub.codec_name, "%s", avcodec_get_name(st->codecpar->codec_id));
	d->pub.channels = st->codecpar->ch_layout.nb_channels;
	d->pub.rate = st->codecpar->sample_rate;
	// The audio track's own duration (an MP4's mdhd), else the file's (a
	// Matroska segment's, which covers every track).
	d->pub.streams = (int32_t)d->fmt->nb_streams;
	if (st->duration != AV_NOPTS_VALUE && st->duration > 0 && st->time_base.num > 0 && st->time_base.den > 0) {
		d->pub.duration_us = av_rescale_q(st->duration, st->time_base, AV_TIME_BASE_Q);
		d->pub.track_duration = 1;
	} else if (d->fmt->duration != AV_NOPTS_VALUE && d->fmt->duration > 0) {
		d->pub.duration_us = d->fmt->duration;
	}
	return d;
}

// sluice_av_start opens the audio track's decoder (by name: opus, vorbis
// or aac) for output at out_rate, refusing decoded frames beyond
// max_channels, max_rate or max_total samples per second over all
// channels. Returns 0, or -1 with pub.kind set.
int32_t sluice_av_start(struct sluice_av_dec *d, int32_t out_rate, int32_t max_channels, int32_t max_rate, int32_t max_total) {
	if (d->pub.kind) return -1;
	const char *name = NULL;
	switch (d->pub.codec) {
	case AV_CODEC_ID_OPUS: name = "opus"; break;
	case AV_CODEC_ID_VORBIS: name = "vorbis"; break;
	case AV_CODEC_ID_AAC: name = "aac"; break;
	}
	const AVCodec *c = name ? avcodec_find_decoder_by_name(name) : NULL;
	if (!c) {
		fail(&d->pub, SLUICE_AV_CODEC, "codec not decoded here", 0);
		return -1;
	}
	d->out_rate = out_rate, d->max_channels = max_channels, d->max_rate = max_rate, d->max_total = max_total;
	d->dec = avcodec_alloc_context3(c);
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (!d->dec || !d->pkt || !d->frame) {
		fail(&d->pub, SLUICE_AV_INTERNAL, "out of memory", 0);
		return -1;
	}
	AVStream *st = d->fmt->streams[d->stream];
	int rc = avcodec_parameters_to_context(d->dec, st->codecpar);
	if (rc >= 0) {
		d->dec->pkt_timebase = st->time_base;
		d->dec->thread_count = 1;
		d->dec->max_samples = 1 << 16;
		rc = avcodec_open2(d->dec, c, NULL);
	}
	if (rc < 0) {
		fail(&d->pub, SLUICE_AV_DAMAGED, "opening the decoder", rc);
		return -1;
	}
	return 0;
}

static int grow(struct sluice_av_dec *d, int64_t more) {
	if (d->pub.out_len + more <= d->out_cap) return 0;
	int64_t cap = d->out_cap ? d->out_cap : 8192;
	while (cap < d->pub.out_len + more) cap *= 2;
	if (cap > (1 << 22)) {
		fail(&d->pub, SLUICE_AV_BOUNDS, "a decoded frame is too long", 0);
		return -1;
	}
	int16_t *o = av_realloc(d->pub.out, (size_t)cap * 2);
	if (!o) {
		fail(&d->pub, SLUICE_AV_INTERNAL, "out of memory", 0);
		return -1;
	}
	d->pub.out = o, d->out_cap = cap;
	return 0;
}

// convert appends frame f (NULL: the resampler's delay) to out.
static int convert(struct sluice_av_dec *d, AVFrame *f) {
	if (!d->swr && !f) return 0;
	int64_t in = f ? f->nb_samples : 0;
	int64_t need = swr_get_out_samples(d->swr, (int)in);
	if (need < 0 || grow(d, need + 16) < 0) return -1;
	uint8_t *o = (uint8_t *)(d->pub.out + d->pub.out_len);
	int n = swr_convert(d->swr, &o, (int)(d->out_cap - d->pub.out_len),
	                    f ? (const uint8_t **)f->extended_data : NULL, (int)in);
	if (n < 0) {
		fail(&d->pub, SLUICE_AV_DAMAGED, "converting the samples", n);
		return -1;
	}
	d->pub.out_len += n;
	return 0;
}

// setup (re)creates the resampler for frame f's layout, format and rate,
// averaging its channels to mono, after flushing the previous one.
static int setup(struct sluice_av_dec *d, AVFrame *f) {
	int ch = f->ch_layout.nb_channels;
	if (ch < 1 || ch > d->max_channels || f->sample_rate < 1000 || f->sample_rate > d->max_rate ||
	    (int64_t)ch * f->sample_rate > d->max_total) {
		d->pub.out_channels = ch, d->pub.out_in_rate = f->sample_rate;
		fail(&d->pub, SLUICE_AV_BOUNDS, "decoded audio beyond the upload bounds", 0);
		return -1;
	}
	if (d->swr && d->swr_rate == f->sample_rate && d->swr_fmt == f->format &&
	    !av_channel_layout_compare(&d->swr_layout, &f->ch_layout))
		return 0;
	if (d->swr) {
		if (convert(d, NULL) < 0) return -1;
		swr_free(&d->swr);
		av_channel_layout_uninit(&d->swr_layout);
	}
	d->pub.out_channels = ch, d->pub.out_in_rate = f->sample_rate;
	AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
	int out_rate = d->out_rate ? d->out_rate : f->sample_rate;
	if (!d->out_rate) d->out_rate = out_rate;
	int rc = swr_alloc_set_opts2(&d->swr, &mono, AV_SAMPLE_FMT_S16, out_rate, &f->ch_layout, f->format, f->sample_rate, 0, NULL);
	double m[64];
	for (int i = 0; i < ch; i++) m[i] = 1.0 / ch;
	if (rc >= 0) rc = swr_set_matrix(d->swr, m, ch);
	if (rc >= 0) rc = swr_init(d->swr);
	if (rc >= 0) rc = av_channel_layout_copy(&d->swr_layout, &f->ch_layout);
	if (rc < 0) {
		fail(&d->pub, SLUICE_AV_DAMAGED, "setting up the resampler", rc);
		return -1;
	}
	d->swr_rate = f->sample_rate, d->swr_fmt = f->format;
	return 0;
}

// sluice_av_next decodes the frames of at most one packet (or the
// decoder's and resampler's tail at the end) into pub.out. Returns
// pub.out_len, or -1 with pub.kind set; pub.eof is set at the end.
int64_t sluice_av_next(struct sluice_av_dec *d) {
	d->pub.out_len = 0;
	if (d->pub.kind) return -1;
	if (d->pub.eof) return 0;
	int read = 0;
	for (;;) {
		int rc = avcodec_receive_frame(d->dec, d->frame);
		if (rc == 0) {
			int bad = setup(d, d->frame) < 0 || convert(d, d->frame) < 0;
			av_frame_unref(d->frame);
			if (bad) return -1;
			continue;
		}
		if (rc == AVERROR_EOF) {
			if (convert(d, NULL) < 0) return -1;
			d->pub.eof = 1;
			return d->pub.out_len;
		}
		if (rc != AVERROR(EAGAIN)) {
			fail(&d->pub, SLUICE_AV_DAMAGED, "decoding", rc);
			return -1;
		}
		if (read) return d->pub.out_len;
		read = 1;
		rc = av_read_frame(d->fmt, d->pkt);
		if (rc == AVERROR_EOF && d->pb->error == 0) {
			rc = avcodec_send_packet(d->dec, NULL);
		} else if (rc < 0) {
			fail(&d->pub, rc == AVERROR_EXIT ? SLUICE_AV_STOPPED : SLUICE_AV_DAMAGED, "reading a packet", rc);
			return -1;
		} else {
			if (d->pkt->stream_index == d->stream) {
				d->pub.packets++;
				rc = avcodec_send_packet(d->dec, d->pkt);
			}
			av_packet_unref(d->pkt);
		}
		if (rc < 0 && rc != AVERROR_EOF) {
			fail(&d->pub, SLUICE_AV_DAMAGED, "decoding", rc);
			return -1;
		}
	}
}

void sluice_av_close(struct sluice_av_dec *d) {
	if (!d) return;
	swr_free(&d->swr);
	av_channel_layout_uninit(&d->swr_layout);
	av_frame_free(&d->frame);
	av_packet_free(&d->pkt);
	avcodec_free_context(&d->dec);
	avformat_close_input(&d->fmt);
	if (d->pb) av_freep(&d->pb->buffer);
	avio_context_free(&d->pb);
	av_free(d->pub.out);
	av_free(d);
}
