/* Helpers shared by the libFuzzer harnesses (tests/fuzz/README.md):
 * a failed check that libFuzzer records as a crash, an in-memory input
 * stream, and a JSON syntax check for the writers' output.  Header only,
 * so a harness stays one file.  */
#ifndef CPROF_FUZZUTIL_H
#define CPROF_FUZZUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property of the code under test that must hold: when it does not,
 * say which and abort, so libFuzzer saves the input as a crash.  */
#define FUZZ_CHECK(cond, ...)                                              \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s: ",       \
				__FILE__, __LINE__, #cond);                \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			abort();                                           \
		}                                                          \
	} while (0)

/* DATA (SIZE bytes) as a read-only stream, without a copy or a file.
 * fmemopen() refuses an empty buffer, so an empty input reads from a
 * static byte with nothing left in it.  */
static inline FILE *fuzz_stream(const uint8_t *data, size_t size)
{
	static char nothing[1];
	FILE *f;
	if (size == 0) {
		f = fmemopen(nothing, 1, "r");
		if (f)
			fgetc(f);
	} else {
		f = fmemopen((void *)data, size, "r");
	}
	FUZZ_CHECK(f != NULL, "fmemopen failed");
	return f;
}

/* A hash of DATA (SIZE bytes), to choose options from the input itself
 * (a crash must reproduce from the input alone) without taking any of
 * its bytes away from the parser.  */
static inline uint64_t fuzz_hash(const uint8_t *data, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 0x100000001b3ULL;
	return h ^ (h >> 29);
}

/* ------------------------------------------------------------ JSON */

struct fuzz_json {
	const char *p, *end;
	int depth;
};

static inline void fuzz_json_space(struct fuzz_json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
				 *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static inline bool fuzz_json_digits(struct fuzz_json *j)
{
	const char *start = j->p;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > start;
}

static inline bool fuzz_json_string(struct fuzz_json *j)
{
	if (j->p >= j->end || *j->p != '"')
		return false;
	for (j->p++; j->p < j->end; j->p++) {
		unsigned char c = (unsigned char)*j->p;
		if (c == '"') {
			j->p++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c != '\\')
			continue;
		if (++j->p >= j->end)
			return false;
		if (*j->p == 'u') {
			for (int i = 0; i < 4; i++) {
				if (++j->p >= j->end || !*j->p ||
				    !strchr("0123456789abcdefABCDEF", *j->p))
					return false;
			}
		} else if (!*j->p || !strchr("\"\\/bfnrt", *j->p)) {
			return false;
		}
	}
	return false;
}

static inline bool fuzz_json_value(struct fuzz_json *j)
{
	fuzz_json_space(j);
	if (j->p >= j->end || ++j->depth > 64)
		return false;
	bool ok = true;
	char c = *j->p;
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->p++;
		fuzz_json_space(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
		} else {
			for (;;) {
				if (c == '{') {
					fuzz_json_space(j);
					if (!fuzz_json_string(j))
						return false;
					fuzz_json_space(j);
					if (j->p >= j->end || *j->p++ != ':')
						return false;
				}
				if (!fuzz_json_value(j))
					return false;
				fuzz_json_space(j);
				if (j->p >= j->end)
					return false;
				if (*j->p == ',') {
					j->p++;
					continue;
				}
				if (*j->p++ != close)
					return false;
				break;
			}
		}
	} else if (c == '"') {
		ok = fuzz_json_string(j);
	} else if (c == '-' || (c >= '0' && c <= '9')) {
		if (c == '-')
			j->p++;
		if (j->p < j->end && *j->p == '0')
			j->p++;
		else if (!fuzz_json_digits(j))
			return false;
		if (j->p < j->end && *j->p == '.') {
			j->p++;
			if (!fuzz_json_digits(j))
				return false;
		}
		if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
			j->p++;
			if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
				j->p++;
			if (!fuzz_json_digits(j))
				return false;
		}
	} else {
		static const char *const words[] = {"true", "false", "null"};
		ok = false;
		for (int i = 0; i < 3 && !ok; i++) {
			size_t n = strlen(words[i]);
			if ((size_t)(j->end - j->p) >= n &&
			    memcmp(j->p, words[i], n) == 0) {
				j->p += n;
				ok = true;
			}
		}
	}
	j->depth--;
	return ok;
}

/* Is TEXT (LEN bytes) one JSON value, surrounded by white space at most?
 * Bytes are checked, not UTF-8.  */
static inline bool fuzz_json_valid(const char *text, size_t len)
{
	struct fuzz_json j = {text, text + len, 0};
	if (!fuzz_json_value(&j))
		return false;
	fuzz_json_space(&j);
	return j.p == j.end;
}

/* How many times NEEDLE occurs in TEXT (LEN bytes).  */
static inline size_t fuzz_count(const char *text, size_t len,
				const char *needle)
{
	size_t n = strlen(needle), count = 0;
	for (const char *p = text; (p = memmem(p, len - (size_t)(p - text),
					       needle, n)) != NULL;
	     p += n)
		count++;
	return count;
}

#endif
