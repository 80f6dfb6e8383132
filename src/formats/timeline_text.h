/* Text helpers the timeline writers share (internal to libcprof): fast
 * unlocked output (a timeline is written from one thread), numbers
 * formatted without printf, JSON strings, and a batch that gathers a
 * sample's events for one write.  */
#ifndef CPROF_TIMELINE_TEXT_H
#define CPROF_TIMELINE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/json.h"
#include "util/grow.h"

static inline void tt_put(FILE *f, const char *s)
{
	fputs_unlocked(s, f);
}

static inline void tt_put_n(FILE *f, const char *s, size_t n)
{
	fwrite_unlocked(s, 1, n, f);
}

/* V in decimal into BUF (at least 24 bytes); returns the length.  */
static inline size_t tt_format_i64(char *buf, int64_t v)
{
	char tmp[24];
	char *end = tmp + sizeof(tmp), *at = end;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		*--at = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--at = '-';
	size_t n = (size_t)(end - at);
	memcpy(buf, at, n);
	return n;
}

static inline void tt_put_i64(FILE *f, int64_t v)
{
	char buf[24];
	tt_put_n(f, buf, tt_format_i64(buf, v));
}

/* TS seconds as microseconds, with three decimals (nanoseconds) only
 * when they are not all zero: "12004187", "1000001.500".  Returns the
 * length.  */
static inline size_t tt_format_us(char *buf, double ts)
{
	/* Rounded half away from zero, as llround() would (no libm).  */
	double scaled = ts * 1e9;
	int64_t ns = (int64_t)(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
	uint64_t mag = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	size_t n = 0;
	if (ns < 0)
		buf[n++] = '-';
	n += tt_format_i64(buf + n, (int64_t)(mag / 1000));
	unsigned frac = (unsigned)(mag % 1000);
	if (frac) {
		buf[n++] = '.';
		buf[n++] = (char)('0' + frac / 100);
		buf[n++] = (char)('0' + frac / 10 % 10);
		buf[n++] = (char)('0' + frac % 10);
	}
	return n;
}

/* Can NAME (LEN bytes) go into a JSON string as it is?  */
static inline bool tt_plain_json(const char *name, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == '"' || c == '\\')
			return false;
	}
	return true;
}

/* NAME (LEN bytes) as a JSON string.  */
static inline void tt_put_json(FILE *f, const char *name, size_t len)
{
	if (!tt_plain_json(name, len)) {
		char *copy = strndup(name, len);
		cp_json_string(f, copy ? copy : "?");
		free(copy);
		return;
	}
	putc_unlocked('"', f);
	tt_put_n(f, name, len);
	putc_unlocked('"', f);
}

/* A growing text: the batch of a sample's events, the per-sample part of
 * an event line.  */
struct tt_text {
	char *data;
	size_t len, cap;
};

/* Room for N more bytes at the end of T; NULL when out of memory.  */
static inline char *tt_room(struct tt_text *t, size_t n)
{
	if (!cp_grow((void **)&t->data, &t->cap, t->len + n + 1, 1, 16))
		return NULL;
	return t->data + t->len;
}

static inline bool tt_append(struct tt_text *t, const char *s, size_t n)
{
	char *at = tt_room(t, n);
	if (!at)
		return false;
	memcpy(at, s, n);
	t->len += n;
	t->data[t->len] = '\0';
	return true;
}

/* Write T to F and empty it.  */
static inline void tt_flush(struct tt_text *t, FILE *f)
{
	if (t->len)
		tt_put_n(f, t->data, t->len);
	t->len = 0;
}

#endif
