/* Expressions of the command language (if, while, set, print, printf,
 * condition): integers, decimals and strings; gdb's operators (|| && !
 * == != < <= > >= + - * / % and parentheses); $variables: the user's,
 * cprof's convenience variables ($_hits, $_samples, $_exitcode,
 * $_overhead, $bpnum, $_thread) and the registers of the thread held at
 * a breakpoint ($pc, $sp, $rdi, ...).  And printf's formatting.  */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/regs.h"
#include "common.h"
#include "cprof/profile.h"
#include "cprof/session.h"
#include "script_int.h"

struct parser {
	struct script *s;
	const char *p;
};

static void skip(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static bool eat(struct parser *ps, const char *op)
{
	skip(ps);
	size_t n = strlen(op);
	if (strncmp(ps->p, op, n) != 0)
		return false;
	/* "<" must not take the first char of "<=", "=" of "==" etc.  */
	if (n == 1 && (op[0] == '<' || op[0] == '>' || op[0] == '!' ||
		       op[0] == '=') && ps->p[1] == '=')
		return false;
	if (n == 1 && (op[0] == '&' || op[0] == '|') && ps->p[1] == op[0])
		return false;
	ps->p += n;
	return true;
}

static int expr_or(struct parser *ps, struct value *out);

/* ---------------------------------------------------------- variables */

static int set_int(struct value *v, int64_t i)
{
	memset(v, 0, sizeof(*v));
	v->kind = V_INT;
	v->i = i;
	return 0;
}

/* A register of the held thread by NAME.  */
static bool reg_value(const struct user_regs_struct *r, const char *name,
		      uint64_t *v)
{
	static const struct {
		const char *name;
		size_t off;
	} regs[] = {
#define R(n, f) {n, offsetof(struct user_regs_struct, f)}
		R("pc", rip), R("rip", rip), R("sp", rsp), R("rsp", rsp),
		R("fp", rbp), R("rbp", rbp), R("rax", rax), R("rbx", rbx),
		R("rcx", rcx), R("rdx", rdx), R("rsi", rsi), R("rdi", rdi),
		R("r8", r8), R("r9", r9), R("r10", r10), R("r11", r11),
		R("r12", r12), R("r13", r13), R("r14", r14), R("r15", r15),
#undef R
	};
	for (size_t i = 0; i < sizeof(regs) / sizeof(*regs); i++)
		if (strcmp(regs[i].name, name) == 0) {
			memcpy(v, (const char *)r + regs[i].off, sizeof(*v));
			return true;
		}
	return false;
}

int var_get(struct script *s, const char *name, struct value *out)
{
	memset(out, 0, sizeof(*out));
	if (strcmp(name, "_hits") == 0)
		return set_int(out, (int64_t)s->last_hits);
	if (strcmp(name, "bpnum") == 0) {
		if (s->bpnum)
			set_int(out, s->bpnum);
		return 0;
	}
	if (strcmp(name, "_exitcode") == 0) {
		if (s->exitcode != INT64_MIN)
			set_int(out, s->exitcode);
		return 0;
	}
	if (strcmp(name, "_exitsignal") == 0) {
		if (s->exitsignal)
			set_int(out, s->exitsignal);
		return 0;
	}
	if (strcmp(name, "_samples") == 0) {
		const struct cp_profile *p = cp_session_profile(s->session);
		return set_int(out, p ? (int64_t)cp_profile_total(p) : 0);
	}
	if (strcmp(name, "_overhead") == 0) {
		uint64_t at = cp_session_attached_ns(s->session);
		uint64_t now = cli_now_ns();
		uint64_t wall = at && now > at ? now - at : 0;
		uint64_t cpu = cp_session_cpu_ns(s->session);
		memset(out, 0, sizeof(*out));
		out->kind = V_DBL;
		out->d = wall ? 100.0 * (double)cpu / (double)wall : 0;
		return 0;
	}
	if (strcmp(name, "_thread") == 0) {
		const struct cp_session_hit *h = cp_session_held(s->session);
		return set_int(out, h ? h->tid : 0);
	}
	if (strcmp(name, "_pid") == 0)
		return set_int(out, cp_session_pid(s->session));
	struct user_regs_struct regs;
	uint64_t v;
	if (reg_value(&(struct user_regs_struct){0}, name, &v)) {
		if (cp_session_held_regs(s->session, &regs) < 0)
			return script_error(s, "$%s: no thread is held at a "
					    "breakpoint", name);
		reg_value(&regs, name, &v);
		return set_int(out, (int64_t)v);
	}
	return var_user(s, name, out);
}

/* ---------------------------------------------------------- primaries */

/* A "string" with C escapes at P (after the quote) into OUT; *END after
 * the closing quote.  Returns 0 or -1.  */
static int parse_string(struct script *s, const char *p, char **out,
			const char **end)
{
	size_t cap = strlen(p) + 1, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return script_error(s, "out of memory");
	while (*p && *p != '"') {
		char c = *p++;
		if (c == '\\' && *p) {
			c = *p++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'e': c = '\033'; break;
			case 'a': c = '\a'; break;
			case '0': c = '\0'; break;
			default: break; /* \" \\ and others: the char */
			}
			if (c == '\0')
				break;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	if (*p != '"') {
		free(buf);
		return script_error(s, "a string without its closing quote");
	}
	*out = buf;
	*end = p + 1;
	return 0;
}

static int primary(struct parser *ps, struct value *out)
{
	skip(ps);
	memset(out, 0, sizeof(*out));
	const char *p = ps->p;
	if (*p == '(') {
		ps->p++;
		if (expr_or(ps, out) < 0)
			return -1;
		if (!eat(ps, ")"))
			return script_error(ps->s, "a ')' is missing");
		return 0;
	}
	if (*p == '"') {
		out->kind = V_STR;
		return parse_string(ps->s, p + 1, &out->s, &ps->p);
	}
	if (*p == '$') {
		size_t n = 1;
		while (isalnum((unsigned char)p[n]) || p[n] == '_')
			n++;
		if (n == 1)
			return script_error(ps->s, "a variable name must "
					    "follow '$'");
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)(n - 1), p + 1);
		ps->p += n;
		return var_get(ps->s, name, out);
	}
	if (isdigit((unsigned char)*p) || *p == '.') {
		char *end;
		errno = 0;
		long long i = strtoll(p, &end, 0);
		if (*end == '.' || *end == 'e' || *end == 'E') {
			out->kind = V_DBL;
			out->d = strtod(p, &end);
		} else {
			if (errno)
				return script_error(ps->s, "number out of range");
			out->kind = V_INT;
			out->i = i;
		}
		ps->p = end;
		return 0;
	}
	if (*p == '\0')
		return script_error(ps->s, "an expression is missing");
	return script_error(ps->s, "cannot read an expression at '%.20s' "
			    "(names of the program's variables are not "
			    "known; use $registers and $variables)", p);
}

static int unary(struct parser *ps, struct value *out)
{
	if (eat(ps, "!")) {
		if (unary(ps, out) < 0)
			return -1;
		bool t = value_true(out);
		value_clear(out);
		return set_int(out, !t);
	}
	if (eat(ps, "-")) {
		if (unary(ps, out) < 0)
			return -1;
		if (out->kind == V_INT)
			out->i = -out->i;
		else if (out->kind == V_DBL)
			out->d = -out->d;
		else
			return script_error(ps->s, "cannot negate that");
		return 0;
	}
	return primary(ps, out);
}

/* ----------------------------------------------------------- binaries */

static int need_number(struct script *s, const struct value *v)
{
	if (v->kind == V_INT || v->kind == V_DBL)
		return 0;
	if (v->kind == V_VOID)
		return script_error(s, "a variable without a value in "
				    "arithmetic");
	return script_error(s, "a string in arithmetic");
}

static double as_dbl(const struct value *v)
{
	return v->kind == V_DBL ? v->d : (double)v->i;
}

/* A op B into A (B cleared).  */
static int binary(struct script *s, const char *op, struct value *a,
		  struct value *b)
{
	int rc = 0;
	bool cmp = strchr("<>=!", op[0]) != NULL;
	if (cmp && (a->kind == V_STR || b->kind == V_STR)) {
		if (a->kind != V_STR || b->kind != V_STR) {
			rc = script_error(s, "comparing a string with a "
					  "number");
			goto out;
		}
		int c = strcmp(a->s, b->s);
		bool r = strcmp(op, "==") == 0   ? c == 0
			 : strcmp(op, "!=") == 0 ? c != 0
			 : strcmp(op, "<") == 0  ? c < 0
			 : strcmp(op, "<=") == 0 ? c <= 0
			 : strcmp(op, ">") == 0  ? c > 0
						 : c >= 0;
		value_clear(a);
		set_int(a, r);
		goto out;
	}
	if (cmp && (a->kind == V_VOID || b->kind == V_VOID) &&
	    (op[0] == '=' || op[0] == '!')) {
		/* $x == 0 with $x unset: false, as a missing value is not 0 */
		bool r = (a->kind == b->kind) == (op[0] == '=');
		value_clear(a);
		set_int(a, r);
		goto out;
	}
	if (need_number(s, a) < 0 || need_number(s, b) < 0) {
		rc = -1;
		goto out;
	}
	if (a->kind == V_INT && b->kind == V_INT) {
		int64_t x = a->i, y = b->i, r = 0;
		if ((op[0] == '/' || op[0] == '%') && y == 0) {
			rc = script_error(s, "division by zero");
			goto out;
		}
		switch (op[0]) {
		case '+': r = (int64_t)((uint64_t)x + (uint64_t)y); break;
		case '-': r = (int64_t)((uint64_t)x - (uint64_t)y); break;
		case '*': r = (int64_t)((uint64_t)x * (uint64_t)y); break;
		case '/': r = y == -1 ? -x : x / y; break;
		case '%': r = y == -1 ? 0 : x % y; break;
		case '=': r = x == y; break;
		case '!': r = x != y; break;
		case '<': r = op[1] ? x <= y : x < y; break;
		case '>': r = op[1] ? x >= y : x > y; break;
		}
		set_int(a, r);
		goto out;
	}
	double x = as_dbl(a), y = as_dbl(b);
	memset(a, 0, sizeof(*a));
	switch (op[0]) {
	case '+': a->kind = V_DBL; a->d = x + y; break;
	case '-': a->kind = V_DBL; a->d = x - y; break;
	case '*': a->kind = V_DBL; a->d = x * y; break;
	case '/':
		if (y == 0) {
			rc = script_error(s, "division by zero");
			goto out;
		}
		a->kind = V_DBL;
		a->d = x / y;
		break;
	case '%':
		if (y == 0) {
			rc = script_error(s, "division by zero");
			goto out;
		}
		a->kind = V_DBL;
		a->d = x - y * (double)(long long)(x / y);
		break;
	case '=': set_int(a, x == y); break;
	case '!': set_int(a, x != y); break;
	case '<': set_int(a, op[1] ? x <= y : x < y); break;
	case '>': set_int(a, op[1] ? x >= y : x > y); break;
	}
out:
	value_clear(b);
	return rc;
}

static int expr_mul(struct parser *ps, struct value *out)
{
	if (unary(ps, out) < 0)
		return -1;
	for (;;) {
		const char *op = eat(ps, "*") ? "*" : eat(ps, "/") ? "/"
					      : eat(ps, "%") ? "%" : NULL;
		if (!op)
			return 0;
		struct value b;
		if (unary(ps, &b) < 0 || binary(ps->s, op, out, &b) < 0)
			return -1;
	}
}

static int expr_add(struct parser *ps, struct value *out)
{
	if (expr_mul(ps, out) < 0)
		return -1;
	for (;;) {
		const char *op = eat(ps, "+") ? "+" : eat(ps, "-") ? "-" : NULL;
		if (!op)
			return 0;
		struct value b;
		if (expr_mul(ps, &b) < 0 || binary(ps->s, op, out, &b) < 0)
			return -1;
	}
}

static int expr_cmp(struct parser *ps, struct value *out)
{
	if (expr_add(ps, out) < 0)
		return -1;
	for (;;) {
		static const char *const ops[] = {"==", "!=", "<=", ">=",
						  "<", ">", NULL};
		const char *op = NULL;
		for (size_t i = 0; ops[i] && !op; i++)
			if (eat(ps, ops[i]))
				op = ops[i];
		if (!op)
			return 0;
		struct value b;
		if (expr_add(ps, &b) < 0 || binary(ps->s, op, out, &b) < 0)
			return -1;
	}
}

static int expr_and(struct parser *ps, struct value *out)
{
	if (expr_cmp(ps, out) < 0)
		return -1;
	while (eat(ps, "&&")) {
		struct value b;
		if (expr_cmp(ps, &b) < 0)
			return -1;
		bool r = value_true(out) && value_true(&b);
		value_clear(out);
		value_clear(&b);
		set_int(out, r);
	}
	return 0;
}

static int expr_or(struct parser *ps, struct value *out)
{
	if (expr_and(ps, out) < 0)
		return -1;
	while (eat(ps, "||")) {
		struct value b;
		if (expr_and(ps, &b) < 0)
			return -1;
		bool r = value_true(out) || value_true(&b);
		value_clear(out);
		value_clear(&b);
		set_int(out, r);
	}
	return 0;
}

int expr_eval(struct script *s, const char *text, struct value *out)
{
	struct parser ps = {s, text};
	memset(out, 0, sizeof(*out));
	if (expr_or(&ps, out) < 0) {
		value_clear(out);
		return -1;
	}
	skip(&ps);
	if (*ps.p) {
		value_clear(out);
		return script_error(s, "unexpected '%.20s' after the "
				    "expression", ps.p);
	}
	return 0;
}

/* ------------------------------------------------------------- printf */

/* The next argument of printf's list at *P (up to a comma outside
 * quotes and parentheses) into VALUE.  */
static int next_arg(struct script *s, const char **p, struct value *value)
{
	const char *q = *p;
	int depth = 0;
	bool quoted = false;
	while (*q && (quoted || depth > 0 || *q != ',')) {
		if (*q == '"' && (q == *p || q[-1] != '\\'))
			quoted = !quoted;
		else if (!quoted && *q == '(')
			depth++;
		else if (!quoted && *q == ')')
			depth--;
		q++;
	}
	char text[1024];
	snprintf(text, sizeof(text), "%.*s", (int)(q - *p), *p);
	*p = *q ? q + 1 : q;
	return expr_eval(s, text, value);
}

int script_format(struct script *s, const char *args, char **out)
{
	while (isspace((unsigned char)*args))
		args++;
	if (*args != '"')
		return script_error(s, "usage: printf \"FORMAT\", ARG...");
	char *format;
	const char *p;
	if (parse_string(s, args + 1, &format, &p) < 0)
		return -1;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == ',')
		p++;
	else if (*p) {
		free(format);
		return script_error(s, "a ',' must follow the format");
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		free(format);
		return script_error(s, "out of memory");
	}
	int rc = 0;
	for (const char *c = format; *c && rc == 0; c++) {
		if (*c != '%') {
			fputc(*c, f);
			continue;
		}
		if (c[1] == '%') {
			fputc('%', f);
			c++;
			continue;
		}
		/* One conversion: flags, width, precision, length, type.  */
		char spec[32];
		size_t n = 0;
		spec[n++] = *c++;
		while (*c && strchr("-+ #0123456789.", *c) && n < 20)
			spec[n++] = *c++;
		while (*c == 'l' || *c == 'h' || *c == 'z')
			c++;
		char type = *c;
		if (!type || !strchr("diuxXocsfgeEp", type)) {
			rc = script_error(s, "unknown conversion in the format");
			break;
		}
		while (isspace((unsigned char)*p))
			p++;
		if (!*p) {
			rc = script_error(s, "the format wants more arguments");
			break;
		}
		struct value v;
		if (next_arg(s, &p, &v) < 0) {
			rc = -1;
			break;
		}
		if (type == 's') {
			char tmp[64];
			spec[n++] = 's';
			spec[n] = '\0';
			fprintf(f, spec, value_text(&v, tmp, sizeof(tmp)));
		} else if (strchr("fgeE", type)) {
			if (need_number(s, &v) < 0)
				rc = -1;
			else {
				spec[n++] = type;
				spec[n] = '\0';
				fprintf(f, spec, as_dbl(&v));
			}
		} else {
			if (need_number(s, &v) < 0)
				rc = -1;
			else {
				long long i = v.kind == V_DBL ? (long long)v.d
							      : (long long)v.i;
				if (type == 'c') {
					fputc((int)i, f);
				} else if (type == 'p') {
					fprintf(f, "0x%llx", (unsigned long long)i);
				} else {
					spec[n++] = 'l';
					spec[n++] = 'l';
					spec[n++] = type;
					spec[n] = '\0';
					fprintf(f, spec, i);
				}
			}
		}
		value_clear(&v);
	}
	while (rc == 0 && isspace((unsigned char)*p))
		p++;
	if (rc == 0 && *p)
		rc = script_error(s, "more arguments than the format uses");
	fclose(f);
	free(format);
	if (rc < 0) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}
