/* The folded-stacks reader: FlameGraph's text format into a profile.
 *
 * A line is "frame;frame;...;frame COUNT": the count follows the last run
 * of spaces or tabs, so frames may contain spaces ("1234 worker", the
 * thread frame of --threads, or "operator new(unsigned long)").  What is
 * accepted, beyond that:
 *
 *   - blank lines and lines beginning with '#' are skipped;
 *   - "\r\n" line ends, a UTF-8 byte-order mark and whitespace after the
 *     count are tolerated;
 *   - a count may be decimal ("12.5", "3.", ".5"); it is rounded half up,
 *     and a line whose count rounds to 0 (or is 0) adds nothing;
 *   - the same stack on several lines adds up.
 *
 * Each distinct frame text becomes one location without an address and
 * with one line; FlameGraph's "_[i]" suffix becomes an inlined line without
 * it, so cp_write_folded() gives the same text back.  Names are interned
 * through the profile's hash table, and the location of a name is found
 * by its (dense) string id in an array: no search grows with the input.  */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"

#define INLINE_SUFFIX "_[i]"
#define INLINE_SUFFIX_LEN (sizeof(INLINE_SUFFIX) - 1)

struct reader {
	struct cp_profile *profile;
	const char *name;       /* for messages */
	unsigned long line_no;
	char *error;
	size_t error_size;
	/* Location id + 1 of each function string id, 0 when none yet; one
	 * array for plain frames, one for "_[i]" frames.  */
	uint32_t *loc_of[2];
	size_t loc_cap;
	uint32_t *stack;        /* the line's locations, root first */
	size_t stack_cap;
};

static void say(struct reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(struct reader *r, const char *fmt, ...)
{
	if (!r->error || r->error_size == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->error, r->error_size, fmt, ap);
	va_end(ap);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
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

/* Parse the count TEXT (LEN bytes, no blanks) into *COUNT, rounded half
 * up.  On error writes the message and returns false.  */
static bool parse_count(struct reader *r, const char *text, size_t len,
			uint64_t *count)
{
	char quoted[48];
	size_t i = 0;
	uint64_t whole = 0;
	bool digits = false;

	while (i < len && text[i] >= '0' && text[i] <= '9') {
		unsigned d = (unsigned)(text[i] - '0');
		if (whole > (UINT64_MAX - d) / 10) {
			excerpt(text, len, quoted);
			say(r, "%s:%lu: count '%s' is too large", r->name,
			    r->line_no, quoted);
			return false;
		}
		whole = whole * 10 + d;
		digits = true;
		i++;
	}
	bool round_up = false;
	if (i < len && text[i] == '.') {
		i++;
		if (i < len && text[i] >= '0' && text[i] <= '9')
			round_up = text[i] >= '5';
		while (i < len && text[i] >= '0' && text[i] <= '9') {
			digits = true;
			i++;
		}
	}
	if (!digits || i != len) {
		excerpt(text, len, quoted);
		if (text[0] == '-')
			say(r, "%s:%lu: count '%s' is negative", r->name,
			    r->line_no, quoted);
		else
			say(r, "%s:%lu: expected a sample count after the last space, found '%s'",
			    r->name, r->line_no, quoted);
		return false;
	}
	if (round_up) {
		if (whole == UINT64_MAX) {
			excerpt(text, len, quoted);
			say(r, "%s:%lu: count '%s' is too large", r->name,
			    r->line_no, quoted);
			return false;
		}
		whole++;
	}
	*count = whole;
	return true;
}

/* The location of frame text NAME (LEN bytes), created on first sight.
 * UINT32_MAX when out of memory.  */
static uint32_t frame_location(struct reader *r, const char *name, size_t len)
{
	bool inlined = len > INLINE_SUFFIX_LEN &&
		       memcmp(name + len - INLINE_SUFFIX_LEN, INLINE_SUFFIX,
			      INLINE_SUFFIX_LEN) == 0;
	if (inlined)
		len -= INLINE_SUFFIX_LEN;
	uint32_t fn = cp_profile_intern(r->profile, name, len);
	if (fn == UINT32_MAX)
		return UINT32_MAX;
	if (fn >= r->loc_cap) {
		size_t cap = r->loc_cap ? r->loc_cap : 1024;
		while (cap <= fn)
			cap *= 2;
		for (int k = 0; k < 2; k++) {
			uint32_t *grown = realloc(r->loc_of[k],
						  cap * sizeof(*grown));
			if (!grown)
				return UINT32_MAX;
			memset(grown + r->loc_cap, 0,
			       (cap - r->loc_cap) * sizeof(*grown));
			r->loc_of[k] = grown;
		}
		r->loc_cap = cap;
	}
	uint32_t *slot = &r->loc_of[inlined][fn];
	if (*slot)
		return *slot - 1;
	struct cp_line line = {.function = fn, .inlined = inlined};
	uint32_t loc = cp_profile_add_location(r->profile, 0, 0, &line, 1);
	if (loc == UINT32_MAX)
		return UINT32_MAX;
	*slot = loc + 1;
	return loc;
}

/* A comment line: "# cprof sample_type: TYPE UNIT" (cp_write_folded's
 * header for counts that are not samples) sets what the counts weigh;
 * other comments are skipped.  */
static void read_header(struct reader *r, const char *line, size_t len)
{
	static const char tag[] = CP_FOLDED_SAMPLE_TYPE_TAG;
	size_t tag_len = sizeof(tag) - 1;
	if (len <= tag_len || memcmp(line, tag, tag_len) != 0)
		return;
	char text[64], type[32], unit[16];
	size_t n = len - tag_len < sizeof(text) - 1 ? len - tag_len
						    : sizeof(text) - 1;
	memcpy(text, line + tag_len, n);
	text[n] = '\0';
	if (sscanf(text, " %31[a-z0-9_] %15[a-z0-9_]", type, unit) == 2)
		cp_profile_set_count_type(r->profile, type, unit);
}

/* Read one line (LEN bytes, no newline).  Returns 0, -CP_E_PARSE (message
 * written) or -CP_E_NOMEM.  */
static int read_line(struct reader *r, char *line, size_t len)
{
	char quoted[48];

	if (memchr(line, '\0', len)) {
		say(r, "%s:%lu: binary data (a NUL byte), not folded stacks",
		    r->name, r->line_no);
		return -CP_E_PARSE;
	}
	while (len > 0 && is_blank(line[len - 1]))
		len--;
	if (len > 0 && line[0] == '#') {
		read_header(r, line, len);
		return 0;
	}
	if (len == 0)
		return 0;

	/* The count: after the last run of blanks.  */
	size_t count_at = len;
	while (count_at > 0 && !is_blank(line[count_at - 1]))
		count_at--;
	size_t frames_len = count_at;
	while (frames_len > 0 && is_blank(line[frames_len - 1]))
		frames_len--;
	if (count_at == 0) {
		excerpt(line, len, quoted);
		say(r, "%s:%lu: no sample count: expected 'frame;frame;... COUNT', found '%s'",
		    r->name, r->line_no, quoted);
		return -CP_E_PARSE;
	}
	uint64_t count;
	if (!parse_count(r, line + count_at, len - count_at, &count))
		return -CP_E_PARSE;
	if (frames_len == 0) {
		say(r, "%s:%lu: a count without a stack", r->name, r->line_no);
		return -CP_E_PARSE;
	}

	/* The frames, root first: check all of them even when the count is
	 * 0, so a malformed line is never silently accepted.  */
	size_t depth = 0;
	for (size_t start = 0;;) {
		const char *end = memchr(line + start, ';', frames_len - start);
		size_t stop = end ? (size_t)(end - line) : frames_len;
		size_t k = start;
		while (k < stop && is_blank(line[k]))
			k++;
		if (k == stop) {
			excerpt(line, frames_len, quoted);
			say(r, "%s:%lu: frame %zu is empty in '%s'", r->name,
			    r->line_no, depth + 1, quoted);
			return -CP_E_PARSE;
		}
		if (count > 0) {
			if (depth == r->stack_cap) {
				size_t cap = r->stack_cap ? 2 * r->stack_cap : 64;
				uint32_t *grown = realloc(r->stack,
							  cap * sizeof(*grown));
				if (!grown)
					return -CP_E_NOMEM;
				r->stack = grown;
				r->stack_cap = cap;
			}
			uint32_t loc = frame_location(r, line + start,
						      stop - start);
			if (loc == UINT32_MAX)
				return -CP_E_NOMEM;
			r->stack[depth] = loc;
		}
		depth++;
		if (!end)
			break;
		start = stop + 1;
	}
	if (count == 0)
		return 0;

	if (cp_profile_total(r->profile) > UINT64_MAX - count) {
		say(r, "%s:%lu: the counts add up to more than %llu", r->name,
		    r->line_no, (unsigned long long)UINT64_MAX);
		return -CP_E_PARSE;
	}
	/* The profile wants the innermost frame first.  */
	for (size_t i = 0, j = depth - 1; i < j; i++, j--) {
		uint32_t t = r->stack[i];
		r->stack[i] = r->stack[j];
		r->stack[j] = t;
	}
	uint32_t stack = cp_profile_intern_stack(r->profile, r->stack, depth);
	if (stack == UINT32_MAX)
		return -CP_E_NOMEM;
	return cp_profile_add(r->profile, 0, stack, count);
}

int cp_read_folded(FILE *stream, const char *name, struct cp_profile **out,
		   char *error, size_t error_size)
{
	struct reader r = {
		.name = name ? name : "<input>",
		.error = error,
		.error_size = error_size,
	};
	char *line = NULL;
	size_t line_cap = 0;
	ssize_t len;
	int rc = 0;

	*out = NULL;
	if (error && error_size)
		error[0] = '\0';
	r.profile = cp_profile_new();
	if (!r.profile) {
		rc = -CP_E_NOMEM;
		goto fail;
	}

	errno = 0;
	while ((len = getline(&line, &line_cap, stream)) >= 0) {
		char *text = line;
		r.line_no++;
		if (len > 0 && text[len - 1] == '\n')
			len--;
		if (r.line_no == 1 && len >= 3 &&
		    memcmp(text, "\xef\xbb\xbf", 3) == 0) {
			text += 3;
			len -= 3;
		}
		rc = read_line(&r, text, (size_t)len);
		if (rc < 0) {
			/* A pprof profile or a compressed file given by
			 * mistake: say what it is rather than "line 1".  Only
			 * when the line is not folded text: a first frame may
			 * begin with these bytes too (cp_write_folded writes
			 * any name).  */
			if (rc == -CP_E_PARSE && r.line_no == 1 &&
			    (unsigned char)line[0] == 0x1f &&
			    (unsigned char)line[1] == 0x8b)
				say(&r, "%s: gzip-compressed data (a pprof profile?), not folded stacks text",
				    r.name);
			if (rc == -CP_E_NOMEM)
				say(&r, "%s:%lu: out of memory", r.name,
				    r.line_no);
			goto fail;
		}
		errno = 0;
	}
	if (!feof(stream) && errno == ENOMEM) {
		say(&r, "%s:%lu: out of memory", r.name, r.line_no + 1);
		rc = -CP_E_NOMEM;
		goto fail;
	}
	if (ferror(stream) || !feof(stream)) {
		int saved = errno;
		say(&r, "%s: cannot read: %s", r.name,
		    strerror(saved ? saved : EIO));
		errno = saved ? saved : EIO;
		rc = -CP_E_SYS;
		goto fail;
	}
	if (cp_profile_total(r.profile) == 0) {
		say(&r, "%s: no samples (the input is empty, or has only blank lines, comments and zero counts)",
		    r.name);
		rc = -CP_E_PARSE;
		goto fail;
	}
	*out = r.profile;
	r.profile = NULL;
fail:
	free(line);
	free(r.stack);
	free(r.loc_of[0]);
	free(r.loc_of[1]);
	cp_profile_free(r.profile);
	return rc;
}
