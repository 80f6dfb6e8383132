/* Reading raw samples (include/cprof/rawread.h).  The input is read in
 * large blocks and each line is parsed in place; a sample's frames are
 * split only when its consumer asks (cp_raw_frames), and only from where
 * it asks: the timeline compares a line with its thread's previous stack
 * on the text and splits the part that differs.  */
#include "cprof/rawread.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "util/grow.h"

struct cp_raw_reader {
	const struct cp_raw_callbacks *cb;
	void *arg;
	const char *name;       /* for messages */
	unsigned long line_no;
	char *error;
	size_t error_size;
	bool said;              /* ERROR holds this line's message */
	const char **frames;    /* cp_raw_frames(): the frames split */
	size_t *lens;
	size_t frames_cap;
	bool weighted;          /* sample lines have a WEIGHT ("# fields") */
};

static void vsay(struct cp_raw_reader *r, bool line, const char *fmt,
		 va_list ap)
{
	r->said = true;
	if (!r->error || r->error_size == 0)
		return;
	int n = line ? snprintf(r->error, r->error_size, "%s:%lu: ", r->name,
				r->line_no)
		     : 0;
	if (n < 0 || (size_t)n >= r->error_size)
		return;
	vsnprintf(r->error + n, r->error_size - (size_t)n, fmt, ap);
}

/* A message about the input as a whole ("NAME: ..." written by FMT).  */
static void say(struct cp_raw_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(struct cp_raw_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(r, false, fmt, ap);
	va_end(ap);
}

void cp_raw_fail(struct cp_raw_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(r, true, fmt, ap);
	va_end(ap);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The first bytes of TEXT (LEN of them) for quoting in a message: at most
 * 40 characters, "..." when cut.  */
static void excerpt(const char *text, size_t len, char out[48])
{
	if (len > 40)
		snprintf(out, 48, "%.37s...", text);
	else
		snprintf(out, 48, "%.*s", (int)len, text);
}

static const double powers_of_ten[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* Parse TEXT (LEN bytes, NUL after them) as a decimal number of seconds:
 * [+-]digits[.digits][e[+-]digits], digits on at least one side of the
 * point.  The common form (at most 15 significant digits, no exponent)
 * is converted exactly without strtod: both the digits and the power of
 * ten are exact doubles, so one division rounds correctly.  */
static bool parse_seconds(const char *text, size_t len, double *out)
{
	size_t i = 0;
	bool negative = false;
	if (i < len && (text[i] == '+' || text[i] == '-'))
		negative = text[i++] == '-';
	uint64_t mantissa = 0;
	unsigned digits = 0, decimals = 0;
	bool any = false, exact = true;
	while (i < len && is_digit(text[i])) {
		if (mantissa || text[i] != '0')
			digits++;
		mantissa = mantissa * 10 + (uint64_t)(text[i] - '0');
		exact &= digits <= 15;
		any = true;
		i++;
	}
	if (i < len && text[i] == '.') {
		i++;
		while (i < len && is_digit(text[i])) {
			if (mantissa || text[i] != '0')
				digits++;
			exact &= digits <= 15;
			mantissa = mantissa * 10 + (uint64_t)(text[i] - '0');
			decimals++;
			any = true;
			i++;
		}
	}
	if (!any)
		return false;
	if (i < len && (text[i] == 'e' || text[i] == 'E')) {
		i++;
		if (i < len && (text[i] == '+' || text[i] == '-'))
			i++;
		if (i == len || !is_digit(text[i]))
			return false;
		while (i < len && is_digit(text[i]))
			i++;
		exact = false;
	}
	if (i != len)
		return false;
	if (exact && decimals < sizeof(powers_of_ten) / sizeof(*powers_of_ten)) {
		double v = (double)mantissa / powers_of_ten[decimals];
		*out = negative ? -v : v;
		return true;
	}
	*out = strtod(text, NULL);
	return true; /* 1e999 is infinite: the caller checks the range */
}

/* Parse a thread id: decimal digits, at most INT_MAX.  */
static bool parse_tid(const char *text, size_t len, pid_t *out)
{
	if (len == 0 || len > 10)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(text[i]))
			return false;
		v = v * 10 + (text[i] - '0');
	}
	if (v > INT_MAX)
		return false;
	*out = (pid_t)v;
	return true;
}

/* Parse a weight: decimal digits, 1 to UINT64_MAX.  */
static bool parse_weight(const char *text, size_t len, uint64_t *out)
{
	if (len == 0 || len > 20)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(text[i]))
			return false;
		unsigned d = (unsigned)(text[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v == 0)
		return false;
	*out = v;
	return true;
}

/* Does the text at P (up to END) begin with the word WORD, followed by a
 * blank or the end?  */
static bool word_is(const char *p, const char *end, const char *word)
{
	size_t n = strlen(word);
	return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 &&
	       (p + n == end || is_blank(p[n]));
}

/* The words of P (up to END) are exactly those of WORDS (one space
 * between each)?  */
static bool words_are(const char *p, const char *end, const char *words)
{
	for (;;) {
		while (p < end && is_blank(*p))
			p++;
		while (*words == ' ')
			words++;
		if (!*words || p == end)
			return !*words && p == end;
		const char *w = words;
		while (*words && *words != ' ')
			words++;
		size_t n = (size_t)(words - w);
		if ((size_t)(end - p) < n || memcmp(p, w, n) != 0 ||
		    (p + n < end && !is_blank(p[n])))
			return false;
		p += n;
	}
}

/* The headers about weights: "fields ...", "frequency HZ", "weight-unit
 * UNIT" (P after the '#' and blanks).  Returns 1 when P was one of them
 * (*RC: what its callback returned), 0 when not, -CP_E_PARSE (message
 * written) for fields we cannot read.  */
static int read_weight_header(struct cp_raw_reader *r, char *p, char *end,
			      int *rc)
{
	*rc = 0;
	if (word_is(p, end, "fields")) {
		p += 6;
		if (words_are(p, end, "SECONDS TID WEIGHT STACK"))
			r->weighted = true;
		else if (words_are(p, end, "SECONDS TID STACK"))
			r->weighted = false;
		else {
			char quoted[48];
			while (p < end && is_blank(*p))
				p++;
			excerpt(p, (size_t)(end - p), quoted);
			cp_raw_fail(r, "unknown fields '%s': expected 'SECONDS TID WEIGHT STACK' or 'SECONDS TID STACK'",
				    quoted);
			return -CP_E_PARSE;
		}
		return 1;
	}
	if (word_is(p, end, "frequency")) {
		p += 9;
		while (p < end && is_blank(*p))
			p++;
		double hz;
		if (r->cb->frequency &&
		    parse_seconds(p, (size_t)(end - p), &hz) && hz >= 1e-6 &&
		    hz <= 1e9)
			*rc = r->cb->frequency(r->arg, hz);
		return 1;
	}
	if (word_is(p, end, "weight-unit")) {
		p += 11;
		enum cp_raw_weight_unit unit = CP_RAW_WEIGHT_UNKNOWN;
		if (words_are(p, end, "samples"))
			unit = CP_RAW_WEIGHT_SAMPLES;
		else if (words_are(p, end, "nanoseconds"))
			unit = CP_RAW_WEIGHT_NANOSECONDS;
		if (r->cb->weight_unit)
			*rc = r->cb->weight_unit(r->arg, unit);
		return 1;
	}
	return 0;
}

/* A header line (LINE, after the '#'): "thread TID NAME", "target PID
 * [NAME]" and the weight headers are used; anything else is a comment.
 * Returns 0 or a -CP_E_* code.  */
static int read_header(struct cp_raw_reader *r, char *line, char *end)
{
	char *p = line;
	while (p < end && is_blank(*p))
		p++;
	int rc;
	int known = read_weight_header(r, p, end, &rc);
	if (known != 0)
		return known < 0 ? known : rc;
	bool thread = (size_t)(end - p) > 6 && memcmp(p, "thread", 6) == 0 &&
		      is_blank(p[6]);
	bool target = (size_t)(end - p) > 6 && memcmp(p, "target", 6) == 0 &&
		      is_blank(p[6]);
	if (!thread && !target)
		return 0;
	p += 6;
	while (p < end && is_blank(*p))
		p++;
	char *id = p;
	while (p < end && !is_blank(*p))
		p++;
	pid_t tid;
	if (!parse_tid(id, (size_t)(p - id), &tid) || tid == 0)
		return 0; /* a comment that begins with the word */
	while (p < end && is_blank(*p))
		p++;
	if (thread)
		return p < end && r->cb->thread ? r->cb->thread(r->arg, tid, p)
						: 0;
	return r->cb->target ? r->cb->target(r->arg, tid, p < end ? p : NULL)
			     : 0;
}

int cp_raw_frames(const struct cp_raw_sample *s, size_t first, size_t at,
		  const char *const **frames_out, const size_t **lens_out,
		  size_t *n)
{
	struct cp_raw_reader *r = s->reader;
	const char *stack = s->stack;
	size_t stack_len = s->stack_len;
	*n = 0;
	*frames_out = (const char *const *)r->frames;
	*lens_out = r->lens;
	if (at > stack_len || (first > 0) != (at > 0))
		return -CP_E_INVAL;
	/* AT ends frame FIRST - 1: the next begins after its ';', if any. */
	bool more = first ? at < stack_len : stack_len > 0;
	if (first && more)
		at++; /* the ';' */
	size_t nnew = 0;
	char quoted[48];
	while (more) {
		const char *frame = stack + at;
		const char *semi = memchr(frame, ';', stack_len - at);
		size_t frame_len = semi ? (size_t)(semi - frame) : stack_len - at;
		bool blank = true;
		for (size_t i = 0; i < frame_len; i++) {
			if (frame[i] == '\0') {
				cp_raw_fail(r, "binary data (a NUL byte), not raw samples");
				return -CP_E_PARSE;
			}
			blank &= is_blank(frame[i]);
		}
		if (blank || (semi && at + frame_len + 1 == stack_len)) {
			excerpt(stack, stack_len, quoted);
			cp_raw_fail(r, "frame %zu is empty in '%s'",
				    first + nnew + 1 + !blank, quoted);
			return -CP_E_PARSE;
		}
		if (nnew == r->frames_cap) {
			size_t cap = r->frames_cap ? 2 * r->frames_cap : 64;
			const char **frames = realloc(r->frames,
						      cap * sizeof(*frames));
			if (frames)
				r->frames = frames;
			size_t *lens = realloc(r->lens, cap * sizeof(*lens));
			if (lens)
				r->lens = lens;
			if (!frames || !lens)
				return -CP_E_NOMEM;
			r->frames_cap = cap;
		}
		r->frames[nnew] = frame;
		r->lens[nnew++] = frame_len;
		more = semi != NULL;
		at += frame_len + 1;
	}
	*frames_out = (const char *const *)r->frames;
	*lens_out = r->lens;
	*n = nnew;
	return 0;
}

/* Read one line (LEN bytes, no newline, NUL after them).  Returns 1 for
 * a sample, 0 for anything else, or a -CP_E_* code (the message may be
 * written: R->said).  */
static int read_line(struct cp_raw_reader *r, char *line, size_t len)
{
	char quoted[48];
	char *end = line + len;
	while (end > line && is_blank(end[-1]))
		end--;
	*end = '\0';
	char *p = line;
	while (p < end && is_blank(*p))
		p++;
	if (p == end)
		return 0;
	if (*p == '#') {
		if (memchr(p, '\0', (size_t)(end - p))) {
			cp_raw_fail(r, "binary data (a NUL byte), not raw samples");
			return -CP_E_PARSE;
		}
		return read_header(r, p + 1, end);
	}

	char *ts = p;
	while (p < end && !is_blank(*p))
		p++;
	char *ts_end = p;
	while (p < end && is_blank(*p))
		p++;
	char *tid_text = p;
	while (p < end && !is_blank(*p))
		p++;
	char *tid_end = p;
	while (p < end && is_blank(*p))
		p++;
	char *weight_text = p;
	if (r->weighted) {
		while (p < end && !is_blank(*p))
			p++;
	}
	char *weight_end = p;
	while (p < end && is_blank(*p))
		p++;
	char *stack = p;
	if (tid_text == tid_end) {
		excerpt(ts, (size_t)(end - ts), quoted);
		cp_raw_fail(r, "missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found '%s'",
			    quoted);
		return -CP_E_PARSE;
	}
	double seconds;
	*ts_end = '\0';
	if (!parse_seconds(ts, (size_t)(ts_end - ts), &seconds) ||
	    !(seconds >= -CP_RAW_MAX_SECONDS && seconds <= CP_RAW_MAX_SECONDS)) {
		excerpt(ts, (size_t)(ts_end - ts), quoted);
		cp_raw_fail(r, "timestamp '%s' is not a number of seconds",
			    quoted);
		return -CP_E_PARSE;
	}
	pid_t tid;
	if (!parse_tid(tid_text, (size_t)(tid_end - tid_text), &tid)) {
		excerpt(tid_text, (size_t)(tid_end - tid_text), quoted);
		cp_raw_fail(r, "thread id '%s' is not a number from 0 to %d",
			    quoted, INT_MAX);
		return -CP_E_PARSE;
	}
	uint64_t weight = 1;
	if (r->weighted &&
	    !parse_weight(weight_text, (size_t)(weight_end - weight_text),
			  &weight)) {
		if (weight_text == weight_end)
			cp_raw_fail(r, "missing weight: expected 'TIMESTAMP TID WEIGHT FRAME;FRAME;...' (see the '# fields' header)");
		else {
			excerpt(weight_text, (size_t)(weight_end - weight_text),
				quoted);
			cp_raw_fail(r, "weight '%s' is not a whole number from 1 to %llu",
				    quoted, (unsigned long long)UINT64_MAX);
		}
		return -CP_E_PARSE;
	}
	struct cp_raw_sample sample = {
		.seconds = seconds,
		.seconds_text = ts,
		.tid = tid,
		.weight = weight,
		.stack = stack,
		.stack_len = (size_t)(end - stack),
		.reader = r,
	};
	int rc = r->cb->sample(r->arg, &sample);
	return rc < 0 ? rc : 1;
}

/* Lines from a stream without getline's copy: the text is read in large
 * blocks into a buffer of ours and each line is handed out in place
 * (NUL-terminated where its newline was; the caller may change it).  */
struct lines {
	FILE *in;
	char *buf;
	size_t cap;
	size_t pos, len;   /* unread bytes: buf[pos, len) */
	size_t block;      /* bytes asked of the next read */
	bool eof;
};

/* Reads begin small and double up to the large block, so a small input
 * never asks for a megabyte: glibc reuses a freed one, but ASan maps and
 * poisons a fresh one at every call (tests/fuzz/fuzz_timeline ran 8 times
 * slower); a large input still goes in large reads.  */
#define LINES_FIRST_BLOCK (1u << 14)
#define LINES_BLOCK (1u << 20)

/* The next line into *LINE (without its newline) and *LEN.  Returns 1, 0
 * at the end of the input, or -CP_E_SYS / -CP_E_NOMEM.  */
static int next_line(struct lines *l, char **line, size_t *len)
{
	size_t scanned = 0; /* bytes after POS known to hold no newline */
	for (;;) {
		char *nl = l->len > l->pos + scanned
				   ? memchr(l->buf + l->pos + scanned, '\n',
					    l->len - l->pos - scanned)
				   : NULL;
		if (nl || (l->eof && l->pos < l->len)) {
			char *end = nl ? nl : l->buf + l->len;
			*line = l->buf + l->pos;
			*len = (size_t)(end - *line);
			*end = '\0'; /* NL's place, or the spare byte */
			l->pos += *len + (nl != NULL);
			return 1;
		}
		if (l->eof)
			return 0;
		scanned = l->len - l->pos;
		/* Keep the partial line, at the front; room for a block and
		 * a terminating NUL.  */
		if (scanned)
			memmove(l->buf, l->buf + l->pos, scanned);
		l->len = scanned;
		l->pos = 0;
		size_t block = l->block;
		l->block = block < LINES_BLOCK ? 2 * block : LINES_BLOCK;
		if (!cp_grow((void **)&l->buf, &l->cap, l->len + block + 1, 1,
			     16))
			return -CP_E_NOMEM;
		size_t got = fread_unlocked(l->buf + l->len, 1, block, l->in);
		l->len += got;
		if (got < block) {
			if (ferror(l->in))
				return -CP_E_SYS;
			l->eof = true;
		}
	}
}

int cp_raw_read(FILE *in, const char *name,
		const struct cp_raw_callbacks *callbacks, void *arg,
		char *error, size_t error_size)
{
	struct cp_raw_reader r = {
		.cb = callbacks,
		.arg = arg,
		.name = name ? name : "<input>",
		.error = error,
		.error_size = error_size,
	};
	struct lines lines = {.in = in, .block = LINES_FIRST_BLOCK};
	char *text;
	size_t len;
	uint64_t samples = 0;
	int rc;

	if (error && error_size)
		error[0] = '\0';
	errno = 0;
	while ((rc = next_line(&lines, &text, &len)) > 0) {
		r.line_no++;
		if (r.line_no == 1) {
			if (len >= 2 && (unsigned char)text[0] == 0x1f &&
			    (unsigned char)text[1] == 0x8b) {
				say(&r, "%s: gzip-compressed data, not raw samples text",
				    r.name);
				rc = -CP_E_PARSE;
				goto out;
			}
			if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
				text += 3;
				len -= 3;
			}
		}
		r.said = false;
		rc = read_line(&r, text, len);
		if (rc < 0) {
			/* A callback's failure it did not explain.  */
			if (!r.said)
				cp_raw_fail(&r, "%s", cp_strerror(rc));
			goto out;
		}
		samples += (uint64_t)rc;
	}
	if (rc == -CP_E_NOMEM) {
		r.line_no++;
		cp_raw_fail(&r, "out of memory");
		goto out;
	}
	if (rc == -CP_E_SYS) {
		int saved = errno ? errno : EIO;
		say(&r, "%s: cannot read: %s", r.name, strerror(saved));
		errno = saved;
		goto out;
	}
	if (samples == 0) {
		say(&r, "%s: no samples (the input is empty, or has only blank lines and headers)",
		    r.name);
		rc = -CP_E_PARSE;
	} else if (error && error_size) {
		error[0] = '\0'; /* a message a callback went past */
	}
out:
	free(lines.buf);
	free(r.frames);
	free(r.lens);
	return rc;
}
