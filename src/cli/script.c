/* The command language: lines, blocks (if, while, define, commands),
 * user-defined commands, variables, the JSON results, and the run of a
 * script with gdb's rule for errors.  The commands themselves are in
 * script_cmds.c, expressions in script_expr.c.  */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cprof/json.h"
#include "cprof/session.h"
#include "script_int.h"

/* Sourced files and user commands calling each other.  */
#define MAX_DEPTH 64

/* --------------------------------------------------------- errors */

int script_error(struct script *s, const char *fmt, ...)
{
	if (s->error_set)
		return -1; /* the first, innermost, says most */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	s->error_set = true;
	return -1;
}

/* ------------------------------------------------------------ output */

void out_text(struct script *s, const char *fmt, ...)
{
	if (s->json)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
}

static struct outbuf *cur(struct script *s)
{
	return s->nout > 0 ? &s->out[s->nout - 1] : NULL;
}

/* The separator and the key of the next field.  */
static FILE *field(struct script *s, const char *key)
{
	struct outbuf *o = cur(s);
	if (!o || !o->f)
		return NULL;
	if (!o->first[o->level])
		fputc(',', o->f);
	o->first[o->level] = false;
	if (key) {
		cp_json_string(o->f, key);
		fputc(':', o->f);
	}
	return o->f;
}

void out_str(struct script *s, const char *key, const char *v)
{
	FILE *f = field(s, key);
	if (f)
		cp_json_string(f, v);
}

void out_int(struct script *s, const char *key, int64_t v)
{
	FILE *f = field(s, key);
	if (f)
		fprintf(f, "%lld", (long long)v);
}

void out_num(struct script *s, const char *key, double v)
{
	FILE *f = field(s, key);
	if (f)
		fprintf(f, "%.6g", v);
}

void out_bool(struct script *s, const char *key, bool v)
{
	FILE *f = field(s, key);
	if (f)
		fputs(v ? "true" : "false", f);
}

void out_null(struct script *s, const char *key)
{
	FILE *f = field(s, key);
	if (f)
		fputs("null", f);
}

void out_open(struct script *s, const char *key, char bracket)
{
	FILE *f = field(s, key);
	struct outbuf *o = cur(s);
	if (!f)
		return;
	fputc(bracket, f);
	if (o->level + 1 < (int)(sizeof(o->first) / sizeof(*o->first)))
		o->level++;
	o->first[o->level] = true;
}

void out_close(struct script *s, char bracket)
{
	struct outbuf *o = cur(s);
	if (!o || !o->f)
		return;
	fputc(bracket, o->f);
	if (o->level > 0)
		o->level--;
}

/* Begin the fields of one JSON line: the result of command NAME, or an
 * event (NAME NULL).  */
static bool out_push(struct script *s, const char *name)
{
	if (!s->json || s->nout >= (int)(sizeof(s->out) / sizeof(*s->out)))
		return false;
	struct outbuf *o = &s->out[s->nout++];
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name ? name : "");
	o->f = open_memstream(&o->buf, &o->len);
	o->first[0] = true;
	return true;
}

/* End it: the line, its fields, then TAIL (JSON text beginning with a
 * comma, or ""), to standard output.  */
static void out_pop(struct script *s, const char *tail)
{
	/* (set print json off ends its own line as it began: in JSON) */
	if (s->nout == 0)
		return;
	struct outbuf *o = &s->out[--s->nout];
	if (o->f)
		fclose(o->f);
	fputc('{', stdout);
	bool any = false;
	if (o->name[0]) {
		fputs("\"command\":", stdout);
		cp_json_string(stdout, o->name);
		any = true;
	}
	if (o->len) {
		if (any)
			fputc(',', stdout);
		fwrite(o->buf, 1, o->len, stdout);
		any = true;
	}
	fputs(any ? tail : tail + (tail[0] == ','), stdout);
	fputs("}\n", stdout);
	fflush(stdout);
	free(o->buf);
}

void out_event(struct script *s, const char *name)
{
	s->event_pushed = out_push(s, NULL);
	out_str(s, "event", name);
}

void out_event_end(struct script *s)
{
	if (s->event_pushed)
		out_pop(s, "");
	s->event_pushed = false;
	if (!s->json)
		fflush(stdout);
}

/* ------------------------------------------------------------ values */

void value_clear(struct value *v)
{
	if (v->kind == V_STR)
		free(v->s);
	memset(v, 0, sizeof(*v));
}

const char *value_text(const struct value *v, char *buf, size_t size)
{
	switch (v->kind) {
	case V_INT:
		snprintf(buf, size, "%lld", (long long)v->i);
		return buf;
	case V_DBL:
		snprintf(buf, size, "%g", v->d);
		return buf;
	case V_STR:
		return v->s;
	default:
		return "void";
	}
}

bool value_true(const struct value *v)
{
	switch (v->kind) {
	case V_INT:
		return v->i != 0;
	case V_DBL:
		return v->d != 0;
	case V_STR:
		return v->s[0] != '\0';
	default:
		return false;
	}
}

static struct var *var_find(struct script *s, const char *name)
{
	for (size_t i = 0; i < s->nvars; i++)
		if (strcmp(s->vars[i].name, name) == 0)
			return &s->vars[i];
	return NULL;
}

int var_set(struct script *s, const char *name, const struct value *v)
{
	struct var *var = var_find(s, name);
	if (!var) {
		if (s->nvars == s->vars_cap) {
			size_t cap = s->vars_cap ? 2 * s->vars_cap : 16;
			void *p = realloc(s->vars, cap * sizeof(*s->vars));
			if (!p)
				return script_error(s, "out of memory");
			s->vars = p;
			s->vars_cap = cap;
		}
		var = &s->vars[s->nvars++];
		memset(var, 0, sizeof(*var));
		var->name = strdup(name);
		if (!var->name) {
			s->nvars--;
			return script_error(s, "out of memory");
		}
	}
	value_clear(&var->v);
	var->v = *v;
	if (v->kind == V_STR) {
		var->v.s = strdup(v->s);
		if (!var->v.s) {
			var->v.kind = V_VOID;
			return script_error(s, "out of memory");
		}
	}
	return 0;
}

int var_user(struct script *s, const char *name, struct value *out)
{
	memset(out, 0, sizeof(*out));
	struct var *var = var_find(s, name);
	if (!var)
		return 0;
	*out = var->v;
	if (var->v.kind == V_STR) {
		out->s = strdup(var->v.s);
		if (!out->s)
			return script_error(s, "out of memory");
	}
	return 0;
}

/* ------------------------------------------------------------ bodies */

void body_free(struct body *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->lines[i]);
	free(b->lines);
	free(b->linenos);
	free(b->file);
	memset(b, 0, sizeof(*b));
}

int body_add(struct script *s, struct body *b, const char *line,
	     unsigned lineno)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 8;
		char **l = realloc(b->lines, cap * sizeof(*l));
		if (!l)
			return script_error(s, "out of memory");
		b->lines = l;
		unsigned *n = realloc(b->linenos, cap * sizeof(*n));
		if (!n)
			return script_error(s, "out of memory");
		b->linenos = n;
		b->cap = cap;
	}
	b->lines[b->n] = strdup(line);
	if (!b->lines[b->n])
		return script_error(s, "out of memory");
	b->linenos[b->n++] = lineno;
	return 0;
}

int body_copy(struct script *s, struct body *dst, const struct body *src)
{
	memset(dst, 0, sizeof(*dst));
	if (src->file && !(dst->file = strdup(src->file)))
		return script_error(s, "out of memory");
	for (size_t i = 0; i < src->n; i++)
		if (body_add(s, dst, src->lines[i], src->linenos[i]) < 0)
			return -1;
	return 0;
}

/* LINE without the blanks around it, in place.  */
static char *trim(char *line)
{
	while (isspace((unsigned char)*line))
		line++;
	size_t n = strlen(line);
	while (n > 0 && isspace((unsigned char)line[n - 1]))
		line[--n] = '\0';
	return line;
}

/* The first word of LINE into WORD (truncated), *REST after it.  */
static void first_word(const char *line, char *word, size_t size,
		       const char **rest)
{
	size_t n = 0;
	while (line[n] && !isspace((unsigned char)line[n]))
		n++;
	snprintf(word, size, "%.*s", (int)n, line);
	line += n;
	while (isspace((unsigned char)*line))
		line++;
	if (rest)
		*rest = line;
}

/* Does a line beginning with WORD open a block that "end" closes?  */
static bool opens_block(const char *word)
{
	static const char *const openers[] = {"if", "while", "define",
					      "commands", "document", NULL};
	for (size_t i = 0; openers[i]; i++)
		if (strcmp(word, openers[i]) == 0)
			return true;
	return false;
}

int read_block(struct script *s, struct script_reader *r, const char *what,
	       struct body *b, bool else_ends, bool *at_else)
{
	int depth = 0;
	if (at_else)
		*at_else = false;
	if (!r)
		return script_error(s, "'%s' needs its lines up to 'end': give "
				    "the block in a file (-x FILE)", what);
	if (!b->file && r->name) {
		b->file = strdup(r->name);
		if (!b->file)
			return script_error(s, "out of memory");
	}
	for (;;) {
		char *raw = r->next(r->arg, ">");
		if (!raw)
			return script_error(s, "the input ended inside '%s': "
					    "an 'end' is missing", what);
		char copy[4096];
		snprintf(copy, sizeof(copy), "%s", raw);
		char *line = trim(copy);
		char word[64];
		first_word(line, word, sizeof(word), NULL);
		if (depth == 0 && strcmp(word, "end") == 0)
			return 0;
		if (depth == 0 && else_ends && strcmp(word, "else") == 0) {
			*at_else = true;
			return 0;
		}
		if (opens_block(word))
			depth++;
		else if (strcmp(word, "end") == 0)
			depth--;
		if (body_add(s, b, line, r->line) < 0)
			return -1;
	}
}

/* Lines of a body, as a reader.  */
struct body_reader {
	struct script_reader r;
	const struct body *body;
	size_t next;
	char buf[4096];
};

static char *body_next(void *arg, const char *prompt)
{
	struct body_reader *br = arg;
	(void)prompt;
	if (br->next >= br->body->n)
		return NULL;
	br->r.line = br->body->linenos[br->next];
	snprintf(br->buf, sizeof(br->buf), "%s", br->body->lines[br->next++]);
	return br->buf;
}

int run_body(struct script *s, const struct body *body)
{
	struct body_reader br = {
		.r = {.next = body_next, .name = body->file ? body->file : "-",
		      .interactive = false},
		.body = body,
	};
	br.r.arg = &br;
	if (s->depth >= MAX_DEPTH)
		return script_error(s, "commands nested more than %d deep",
				    MAX_DEPTH);
	s->depth++;
	int rc = 0;
	char *line;
	while (!s->done && (line = body_next(&br, ">")) != NULL) {
		rc = exec_line(s, line, &br.r);
		if (rc < 0 || s->loop_control)
			break;
	}
	s->depth--;
	return rc;
}

/* -------------------------------------------------- user definitions */

static struct definition *def_find(struct script *s, const char *name)
{
	for (size_t i = 0; i < s->ndefs; i++)
		if (strcmp(s->defs[i].name, name) == 0)
			return &s->defs[i];
	return NULL;
}

static int do_define(struct script *s, const char *rest,
		     struct script_reader *r)
{
	char name[64];
	first_word(rest, name, sizeof(name), NULL);
	if (!name[0])
		return script_error(s, "usage: define NAME, then its lines, "
				    "then end");
	if (!isalpha((unsigned char)name[0]) && name[0] != '_')
		return script_error(s, "'%s' is not a command name", name);
	if (command_find(name))
		return script_error(s, "'%s' is a built-in command", name);
	struct body b = {0};
	if (read_block(s, r, "define", &b, false, NULL) < 0) {
		body_free(&b);
		return -1;
	}
	struct definition *d = def_find(s, name);
	if (d) {
		body_free(&d->body);
		d->body = b;
		return 0;
	}
	if (s->ndefs == s->defs_cap) {
		size_t cap = s->defs_cap ? 2 * s->defs_cap : 8;
		void *p = realloc(s->defs, cap * sizeof(*s->defs));
		if (!p) {
			body_free(&b);
			return script_error(s, "out of memory");
		}
		s->defs = p;
		s->defs_cap = cap;
	}
	d = &s->defs[s->ndefs];
	d->name = strdup(name);
	if (!d->name) {
		body_free(&b);
		return script_error(s, "out of memory");
	}
	d->body = b;
	s->ndefs++;
	return 0;
}

int split_words(char *args, char **argv, int max, bool keep_quotes)
{
	int n = 0;
	char *p = args;
	while (*p && n < max) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		char *w = p, *o = p;
		bool quoted = false;
		while (*p && (quoted || !isspace((unsigned char)*p))) {
			if (*p == '"') {
				quoted = !quoted;
				if (!keep_quotes) {
					p++;
					continue;
				}
			} else if (*p == '\\' && p[1] && keep_quotes) {
				*o++ = *p++;
			}
			*o++ = *p++;
		}
		if (*p)
			p++;
		*o = '\0';
		argv[n++] = w;
	}
	return n;
}

/* Run user command D with ARGS: its lines with $argc and $arg0... put
 * in as text, as gdb does.  */
static int run_definition(struct script *s, struct definition *d,
			  const char *args)
{
	char copy[4096];
	snprintf(copy, sizeof(copy), "%s", args);
	char *argv[10];
	int argc = split_words(copy, argv, 10, true);
	struct body b = {0};
	int rc = 0;
	if (d->body.file && !(b.file = strdup(d->body.file)))
		return script_error(s, "out of memory");
	for (size_t i = 0; i < d->body.n && rc == 0; i++) {
		char line[4096];
		size_t used = 0;
		for (const char *p = d->body.lines[i]; *p && used + 1 < sizeof(line);) {
			if (strncmp(p, "$argc", 5) == 0 &&
			    !isalnum((unsigned char)p[5]) && p[5] != '_') {
				used += (size_t)snprintf(line + used,
							 sizeof(line) - used,
							 "%d", argc);
				p += 5;
				continue;
			}
			if (strncmp(p, "$arg", 4) == 0 &&
			    isdigit((unsigned char)p[4]) &&
			    !isalnum((unsigned char)p[5])) {
				int k = p[4] - '0';
				if (k >= argc) {
					/* left as it is: an error only if
					 * the line runs (an if $argc > 1
					 * branch may not) */
					line[used++] = *p++;
					continue;
				}
				used += (size_t)snprintf(line + used,
							 sizeof(line) - used,
							 "%s", argv[k]);
				p += 5;
				continue;
			}
			line[used++] = *p++;
		}
		if (used >= sizeof(line))
			used = sizeof(line) - 1;
		line[used] = '\0';
		if (rc == 0)
			rc = body_add(s, &b, line, d->body.linenos[i]);
	}
	if (rc == 0)
		rc = run_body(s, &b);
	body_free(&b);
	return rc;
}

/* -------------------------------------------------- if, while, commands */

static int do_if(struct script *s, const char *cond, struct script_reader *r)
{
	struct body then = {0}, other = {0};
	bool at_else = false;
	int rc = read_block(s, r, "if", &then, true, &at_else);
	if (rc == 0 && at_else)
		rc = read_block(s, r, "else", &other, false, NULL);
	if (rc == 0) {
		struct value v = {0};
		rc = expr_eval(s, cond, &v);
		if (rc == 0)
			rc = run_body(s, value_true(&v) ? &then : &other);
		value_clear(&v);
	}
	body_free(&then);
	body_free(&other);
	return rc;
}

static int do_while(struct script *s, const char *cond,
		    struct script_reader *r)
{
	struct body b = {0};
	int rc = read_block(s, r, "while", &b, false, NULL);
	while (rc == 0 && !s->done) {
		if (s->cfg.interrupt && *s->cfg.interrupt) {
			rc = script_error(s, "interrupted");
			break;
		}
		struct value v = {0};
		rc = expr_eval(s, cond, &v);
		bool go = value_true(&v);
		value_clear(&v);
		if (rc < 0 || !go)
			break;
		rc = run_body(s, &b);
		if (s->loop_control == 1) {
			s->loop_control = 0;
			break;
		}
		s->loop_control = 0;
	}
	body_free(&b);
	return rc;
}

struct bp_extra *bp_extra(struct script *s, int id, bool create)
{
	for (size_t i = 0; i < s->nbps; i++)
		if (s->bps[i].id == id)
			return &s->bps[i];
	if (!create)
		return NULL;
	if (s->nbps == s->bps_cap) {
		size_t cap = s->bps_cap ? 2 * s->bps_cap : 8;
		void *p = realloc(s->bps, cap * sizeof(*s->bps));
		if (!p)
			return NULL;
		s->bps = p;
		s->bps_cap = cap;
	}
	struct bp_extra *b = &s->bps[s->nbps++];
	memset(b, 0, sizeof(*b));
	b->id = id;
	return b;
}

void bp_extra_drop(struct script *s, int id)
{
	for (size_t i = 0; i < s->nbps; i++)
		if (s->bps[i].id == id) {
			body_free(&s->bps[i].commands);
			free(s->bps[i].condition);
			s->bps[i] = s->bps[--s->nbps];
			return;
		}
}

static int do_commands(struct script *s, const char *rest,
		       struct script_reader *r)
{
	int id = s->bpnum;
	if (*rest) {
		char *end;
		const char *p = rest[0] == '$' ? NULL : rest;
		long v = p ? strtol(p, &end, 10) : 0;
		if (!p || end == p || *trim(end))
			return script_error(s, "usage: commands [N]: N is a "
					    "breakpoint number");
		id = (int)v;
	}
	size_t n = 0;
	const struct cp_session_break *bps = cp_session_breaks(s->session, &n);
	bool known = false;
	for (size_t i = 0; i < n; i++)
		known |= bps[i].id == id;
	struct body b = {0};
	if (read_block(s, r, "commands", &b, false, NULL) < 0) {
		body_free(&b);
		return -1;
	}
	if (!known) {
		body_free(&b);
		return id ? script_error(s, "no breakpoint number %d", id)
			  : script_error(s, "no breakpoint set yet: "
					 "commands N, or break first");
	}
	struct bp_extra *e = bp_extra(s, id, true);
	if (!e) {
		body_free(&b);
		return script_error(s, "out of memory");
	}
	body_free(&e->commands);
	e->commands = b;
	e->has_commands = true;
	return 0;
}

/* ------------------------------------------------------------ a line */

/* Replace each $NAME in TEXT by its value (gdb substitutes only in
 * expressions; cprof also in the arguments of other commands, so
 * `sample for $t` and `write $file` work).  A $NAME without a value is
 * an error.  Into OUT.  Returns 0 or -1.  */
static int expand(struct script *s, const char *text, char *out, size_t size)
{
	size_t used = 0;
	bool quoted = false;
	for (const char *p = text; *p;) {
		if (*p == '"')
			quoted = !quoted;
		if (*p == '$' && !quoted &&
		    (isalpha((unsigned char)p[1]) || p[1] == '_')) {
			char name[64];
			size_t n = 1;
			while (isalnum((unsigned char)p[n]) || p[n] == '_')
				n++;
			snprintf(name, sizeof(name), "%.*s", (int)(n - 1), p + 1);
			struct value v = {0};
			if (var_get(s, name, &v) < 0)
				return -1;
			if (v.kind == V_VOID)
				return script_error(s, "$%s has no value", name);
			char buf[64];
			used += (size_t)snprintf(out + used,
						 used < size ? size - used : 0,
						 "%s", value_text(&v, buf,
								  sizeof(buf)));
			value_clear(&v);
			p += n;
			continue;
		}
		if (used + 1 < size)
			out[used] = *p;
		used++;
		p++;
	}
	if (used >= size)
		return script_error(s, "line too long");
	out[used] = '\0';
	return 0;
}

/* Say the error of the command running: "FILE:LINE: COMMAND: what"
 * (gdb's where, then what), and in JSON mode its result line.  */
static void say_error(struct script *s, const char *word, bool pushed,
		      struct script_reader *r)
{
	if (s->json || pushed) {
		if (!pushed)
			pushed = out_push(s, word);
		char *t = NULL;
		size_t tl = 0;
		FILE *f = open_memstream(&t, &tl);
		if (f) {
			fputs(",\"ok\":false,\"error\":", f);
			cp_json_string(f, s->error);
			if (s->file) {
				fputs(",\"file\":", f);
				cp_json_string(f, s->file);
				fprintf(f, ",\"line\":%u", s->line);
			}
			fclose(f);
		}
		if (pushed)
			out_pop(s, t ? t : "");
		free(t);
	}
	fflush(stdout);
	if (s->file && r && !r->interactive)
		message("%s:%u: %s: %s", s->file, s->line, word, s->error);
	else
		message("%s: %s", word, s->error);
	s->error_set = false;
}

int exec_line(struct script *s, const char *text, struct script_reader *r)
{
	char copy[4096];
	snprintf(copy, sizeof(copy), "%s", text);
	char *line = trim(copy);
	if (!*line || *line == '#')
		return 0;
	char word[64];
	const char *rest;
	first_word(line, word, sizeof(word), &rest);
	/* The context of messages.  */
	const char *saved_file = s->file;
	unsigned saved_line = s->line;
	char saved_command[sizeof(s->command)];
	memcpy(saved_command, s->command, sizeof(saved_command));
	if (r) {
		s->file = r->name;
		s->line = r->line;
	}
	snprintf(s->command, sizeof(s->command), "%s", word);
	s->error_set = false;
	int rc = 0;
	bool pushed = false;
	const struct command *cmd = NULL;
	struct definition *d = NULL;
	char args[4096];
	/* Blocks and definitions: not commands of their own.  */
	if (s->cfg.interrupt && *s->cfg.interrupt && !(r && r->interactive)) {
		/* interrupted before this line: it does not run */
		rc = script_error(s, "interrupted");
	} else if (strcmp(word, "if") == 0) {
		rc = do_if(s, rest, r);
	} else if (strcmp(word, "while") == 0) {
		rc = do_while(s, rest, r);
	} else if (strcmp(word, "define") == 0) {
		rc = do_define(s, rest, r);
	} else if (strcmp(word, "document") == 0) {
		struct body b = {0};
		rc = read_block(s, r, "document", &b, false, NULL);
		body_free(&b);
	} else if (strcmp(word, "commands") == 0) {
		rc = do_commands(s, rest, r);
	} else if (strcmp(word, "loop_break") == 0 ||
		   strcmp(word, "loop_continue") == 0) {
		s->loop_control = word[5] == 'b' ? 1 : 2;
	} else if (strcmp(word, "end") == 0 || strcmp(word, "else") == 0) {
		rc = script_error(s, "'%s' without a block to end", word);
	} else if ((cmd = command_find(word)) == NULL &&
		   (d = def_find(s, word)) == NULL) {
		rc = script_error(s, "undefined command \"%s\"; try \"help\"",
				  word);
	} else {
		/* A thread held at a breakpoint goes on before anything
		 * that does not need it.  */
		if ((!cmd || !cmd->holds) && cp_session_held(s->session))
			cp_session_continue(s->session);
		if (cmd && cmd->raw)
			snprintf(args, sizeof(args), "%s", rest);
		else
			rc = expand(s, rest, args, sizeof(args));
		if (rc == 0 && d) {
			rc = run_definition(s, d, args);
		} else if (rc == 0) {
			pushed = out_push(s, cmd->name);
			rc = cmd->run(s, args, r);
			if (rc == 0 && pushed)
				out_pop(s, ",\"ok\":true");
		}
	}
	if (rc < 0 && s->error_set)
		say_error(s, cmd ? cmd->name : word, pushed, r);
	else if (pushed && rc < 0)
		out_pop(s, ",\"ok\":false");
	/* Each answer is out before the next line is read (a program
	 * driving us through pipes waits for it).  */
	fflush(stdout);
	s->file = saved_file;
	s->line = saved_line;
	memcpy(s->command, saved_command, sizeof(saved_command));
	return rc < 0 ? -1 : 0;
}

/* -------------------------------------------------------- the script */

struct script *script_new(struct cp_session *session,
			  const struct script_config *config)
{
	struct script *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->session = session;
	s->cfg = *config;
	s->json = config->json;
	s->exitcode = INT64_MIN;
	return s;
}

struct cp_session *script_session(struct script *s)
{
	return s->session;
}

bool script_done(const struct script *s, int *status)
{
	if (status)
		*status = s->quit_status;
	return s->done;
}

int script_exec(struct script *s, const char *line, struct script_reader *r)
{
	return exec_line(s, line, r) < 0 ? 1 : 0;
}

int script_run(struct script *s, struct script_reader *r)
{
	int status = 0;
	char *line;
	while (!s->done && (line = r->next(r->arg, "(cprof) ")) != NULL) {
		/* At the console, a Ctrl-C ends the command it came in;
		 * elsewhere it ends the script (exec_line), even one that
		 * came between two lines.  */
		if (r->interactive && s->cfg.interrupt)
			*s->cfg.interrupt = 0;
		const char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue; /* comments and blanks keep the status */
		status = exec_line(s, line, r) < 0 ? 1 : 0;
		s->loop_control = 0;
		if (status && !r->interactive)
			break;
	}
	if (s->done)
		return s->quit_status;
	return status;
}

int script_run_file(struct script *s, const char *path)
{
	int rc = script_source(s, path);
	if (rc < 0 && s->error_set) {
		message("%s", s->error);
		s->error_set = false;
	}
	return rc < 0 ? 1 : 0;
}

void script_free(struct script *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nvars; i++) {
		free(s->vars[i].name);
		value_clear(&s->vars[i].v);
	}
	free(s->vars);
	for (size_t i = 0; i < s->ndefs; i++) {
		free(s->defs[i].name);
		body_free(&s->defs[i].body);
	}
	free(s->defs);
	while (s->nbps)
		bp_extra_drop(s, s->bps[0].id);
	free(s->bps);
	free(s->program);
	free(s);
}
