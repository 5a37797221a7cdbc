// enc.c: encoding interleaved PCM16 with a named FFmpeg encoder into a
// named muxer's container, in memory bounded by a limit (see av.c).
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>
#include <stdint.h>
#include <string.h>

// struct sluice_av_enc_pub is what Go reads (av.go's encPub).
struct sluice_av_enc_pub {
	int32_t failed;
	int32_t pad;
	uint8_t *data; // after sluice_av_enc_finish: size bytes
	int64_t size;
	char err[256];
};

struct sluice_av_enc {
	struct sluice_av_enc_pub pub;
	int64_t cap, limit, pos;
	AVIOContext *pb;
	AVFormatContext *fmt;
	AVCodecContext *enc;
	AVStream *st;
	SwrContext *swr;
	AVAudioFifo *fifo;
	AVFrame *frame;
	AVPacket *pkt;
	int channels;
	int64_t pts;
	int header;
};

int32_t sluice_av_enc_abi(void) { return (int32_t)sizeof(struct sluice_av_enc_pub); }

static void efail(struct sluice_av_enc *e, const char *what, int code) {
	if (e->pub.failed) return;
	e->pub.failed = 1;
	char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
	if (code) av_strerror(code, msg, sizeof msg);
	snprintf(e->pub.err, sizeof e->pub.err, "%s%s%s", what, code ? ": " : "", msg);
}

static int write_cb(void *opaque, uint8_t *buf, int n) {
	struct sluice_av_enc *e = opaque;
	int64_t end = e->pos + n;
	if (end > e->limit) return AVERROR(ENOSPC);
	if (end > e->cap) {
		int64_t cap = e->cap ? e->cap : 65536;
		while (cap < end) cap *= 2;
		uint8_t *d = av_realloc(e->pub.data, (size_t)cap);
		if (!d) return AVERROR(ENOMEM);
		e->pub.data = d, e->cap = cap;
	}
	memcpy(e->pub.data + e->pos, buf, (size_t)n);
	e->pos = end;
	if (end > e->pub.size) e->pub.size = end;
	return n;
}

static int64_t wseek_cb(void *opaque, int64_t off, int whence) {
	struct sluice_av_enc *e = opaque;
	int64_t p;
	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE: return e->pub.size;
	case SEEK_SET: p = off; break;
	case SEEK_CUR: p = e->pos + off; break;
	case SEEK_END: p = e->pub.size + off; break;
	default: return AVERROR(EINVAL);
	}
	if (p < 0 || p > e->pub.size) return AVERROR(EINVAL);
	e->pos = p;
	return p;
}

// sluice_av_enc_open prepares encoder (e.g. "aac") into muxer (e.g.
// "adts", "ipod", "webm") at rate with channels, bitrate bits per second
// (0: the encoder's default), output at most limit bytes. streamable != 0
// writes as to a pipe (no seeking back: no duration in a WebM, as
// browsers' MediaRecorder writes it). opts are the muxer's options as
// "key=value:key=value" (e.g. movflags=+frag_keyframe+empty_moov for a
// fragmented MP4, as Safari's MediaRecorder writes). NULL only when out
// of memory.
struct sluice_av_enc *sluice_av_enc_open(const char *muxer, const char *encoder, int32_t rate, int32_t channels, int64_t bitrate, int64_t limit, int32_t streamable, const char *opts) {
	struct sluice_av_enc *e = av_mallocz(sizeof *e);
	if (!e) return NULL;
	e->limit = limit, e->channels = channels;
	const AVCodec *c = avcodec_find_encoder_by_name(encoder);
	if (!c) {
		efail(e, "no such encoder", 0);
		return e;
	}
	int rc = avformat_alloc_output_context2(&e->fmt, NULL, muxer, NULL);
	if (rc < 0) {
		efail(e, "no such muxer", rc);
		return e;
	}
	uint8_t *buf = av_malloc(32768);
	if (buf) e->pb = avio_alloc_context(buf, 32768, 1, e, NULL, write_cb, streamable ? NULL : wseek_cb);
	e->enc = avcodec_alloc_context3(c);
	e->st = avformat_new_stream(e->fmt, NULL);
	e->frame = av_frame_alloc();
	e->pkt = av_packet_alloc();
	if (!e->pb || !e->enc || !e->st || !e->frame || !e->pkt) {
		if (!e->pb) av_free(buf);
		efail(e, "out of memory", 0);
		return e;
	}
	e->fmt->pb = e->pb;
	e->fmt->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_BITEXACT;
	e->enc->sample_rate = rate;
	av_channel_layout_default(&e->enc->ch_layout, channels);
	e->enc->sample_fmt = c->sample_fmts ? c->sample_fmts[0] : AV_SAMPLE_FMT_S16;
	if (bitrate > 0) e->enc->bit_rate = bitrate;
	e->enc->time_base = (AVRational){1, rate};
	e->enc->flags |= AV_CODEC_FLAG_BITEXACT;
	e->enc->thread_count = 1;
	if (e->fmt->oformat->flags & AVFMT_GLOBALHEADER) e->enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
	rc = avcodec_open2(e->enc, c, NULL);
	if (rc >= 0) rc = avcodec_parameters_from_context(e->st->codecpar, e->enc);
	if (rc < 0) {
		efail(e, "opening the encoder", rc);
		return e;
	}
	e->st->time_base = e->enc->time_base;
	AVChannelLayout in = {0};
	av_channel_layout_default(&in, channels);
	rc = swr_alloc_set_opts2(&e->swr, &e->enc->ch_layout, e->enc->sample_fmt, rate, &in, AV_SAMPLE_FMT_S16, rate, 0, NULL);
	if (rc >= 0) rc = swr_init(e->swr);
	if (rc < 0) {
		efail(e, "setting up the converter", rc);
		return e;
	}
	e->fifo = av_audio_fifo_alloc(e->enc->sample_fmt, channels, 4096);
	if (!e->fifo) {
		efail(e, "out of memory", 0);
		return e;
	}
	AVDictionary *dict = NULL;
	if (opts && *opts && (rc = av_dict_parse_string(&dict, opts, "=", ":", 0)) < 0) {
		av_dict_free(&dict);
		efail(e, "parsing the muxer's options", rc);
		return e;
	}
	rc = avformat_write_header(e->fmt, &dict);
	av_dict_free(&dict);
	if (rc < 0) {
		efail(e, "writing the header", rc);
		return e;
	}
	e->header = 1;
	return e;
}

static int drain(struct sluice_av_enc *e) {
	for (;;) {
		int rc = avcodec_receive_packet(e->enc, e->pkt);
		if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
		if (rc < 0) {
			efail(e, "encoding", rc);
			return -1;
		}
		av_packet_rescale_ts(e->pkt, e->enc->time_base, e->st->time_base);
		e->pkt->stream_index = e->st->index;
		rc = av_interleaved_write_frame(e->fmt, e->pkt);
		if (rc < 0) {
			efail(e, "writing", rc);
			return -1;
		}
	}
}

// send encodes frames of the encoder's frame size from the fifo; with
// last, the rest too (padded with silence when the encoder needs whole
// frames).
static int send(struct sluice_av_enc *e, int last) {
	int fs = e->enc->frame_size > 0 ? e->enc->frame_size : 1024;
	int small = (e->enc->codec->capabilities & (AV_CODEC_CAP_SMALL_LAST_FRAME | AV_CODEC_CAP_VARIABLE_FRAME_SIZE)) != 0;
	while (av_audio_fifo_size(e->fifo) >= fs || (last && av_audio_fifo_size(e->fifo) > 0)) {
		int n = av_audio_fifo_size(e->fifo) < fs ? av_audio_fifo_size(e->fifo) : fs;
		av_frame_unref(e->frame);
		e->frame->nb_samples = small ? n : fs;
		e->frame->format = e->enc->sample_fmt;
		e->frame->sample_rate = e->enc->sample_rate;
		int rc = av_channel_layout_copy(&e->frame->ch_layout, &e->enc->ch_layout);
		if (rc >= 0) rc = av_frame_get_buffer(e->frame, 0);
		if (rc >= 0) rc = av_samples_set_silence(e->frame->extended_data, 0, e->frame->nb_samples, e->channels, e->enc->sample_fmt);
		if (rc >= 0 && av_audio_fifo_read(e->fifo, (void **)e->frame->extended_data, n) != n) rc = AVERROR_BUG;
		if (rc < 0) {
			efail(e, "framing", rc);
			return -1;
		}
		e->frame->pts = e->pts;
		e->pts += e->frame->nb_samples;
		rc = avcodec_send_frame(e->enc, e->frame);
		if (rc < 0) {
			efail(e, "encoding", rc);
			return -1;
		}
		if (drain(e) < 0) return -1;
	}
	return 0;
}

// sluice_av_enc_write encodes frames interleaved PCM16 frames. 0 or -1.
int32_t sluice_av_enc_write(struct sluice_av_enc *e, const int16_t *pcm, int64_t frames) {
	if (e->pub.failed) return -1;
	uint8_t **planes = NULL;
	int rc = av_samples_alloc_array_and_samples(&planes, NULL, e->channels, (int)frames + 64, e->enc->sample_fmt, 0);
	if (rc < 0) {
		efail(e, "out of memory", rc);
		return -1;
	}
	const uint8_t *in = (const uint8_t *)pcm;
	int n = swr_convert(e->swr, planes, (int)frames + 64, &in, (int)frames);
	if (n < 0 || av_audio_fifo_write(e->fifo, (void **)planes, n) != n) {
		efail(e, "converting", n < 0 ? n : AVERROR(ENOMEM));
		n = -1;
	}
	av_freep(&planes[0]);
	av_freep(&planes);
	if (n < 0) return -1;
	return send(e, 0);
}

// sluice_av_enc_finish flushes the encoder and writes the trailer;
// pub.data then holds pub.size bytes. 0 or -1.
int32_t sluice_av_enc_finish(struct sluice_av_enc *e) {
	if (e->pub.failed) return -1;
	if (send(e, 1) < 0) return -1;
	int rc = avcodec_send_frame(e->enc, NULL);
	if (rc < 0 || drain(e) < 0) {
		efail(e, "flushing", rc);
		return -1;
	}
	rc = av_write_trailer(e->fmt);
	e->header = 0;
	if (rc >= 0) avio_flush(e->pb);
	if (rc < 0 || e->pb->error < 0) {
		efail(e, "writing the trailer", rc < 0 ? rc : e->pb->error);
		return -1;
	}
	return 0;
}

void sluice_av_enc_close(struct sluice_av_enc *e) {
	if (!e) return;
	av_packet_free(&e->pkt);
	av_frame_free(&e->frame);
	av_audio_fifo_free(e->fifo);
	swr_free(&e->swr);
	avcodec_free_context(&e->enc);
	avformat_free_context(e->fmt);
	if (e->pb) av_freep(&e->pb->buffer);
	avio_context_free(&e->pb);
	av_free(e->pub.data);
	av_free(e);
}
