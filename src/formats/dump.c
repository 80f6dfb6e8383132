/* The dump's writers: text (like eu-stack), JSON, and the dump as a
 * profile (one sample a thread) for the profile formats.  */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/json.h"
#include "cprof/procfs.h"
#include "formats/entries.h"

static void state_text(const struct cp_dump_thread *t, char *buf, size_t size)
{
	const char *name = cp_syscall_name(t->syscall);
	if ((t->state == 'S' || t->state == 'D') && name)
		snprintf(buf, size, "%s in %s", cp_task_state_name(t->state),
			 name);
	else
		snprintf(buf, size, "%s", cp_task_state_name(t->state));
}

int cp_write_dump_text(const struct cp_dump *dump, bool lines, FILE *f)
{
	for (size_t i = 0; i < dump->nthreads; i++) {
		const struct cp_dump_thread *t = &dump->threads[i];
		char state[96];
		state_text(t, state, sizeof(state));
		fprintf(f, "%sThread %d \"%s\" (%s)\n", i ? "\n" : "",
			(int)t->tid, t->name, state);
		for (size_t j = 0; j < t->nframes; j++) {
			const struct cp_dump_frame *fr = &t->frames[j];
			fprintf(f, "  #%-2zu 0x%016" PRIx64 " in %s", j,
				fr->address, fr->frame->function);
			if (fr->frame->inlined)
				fputs(" (inlined)", f);
			if (lines && fr->frame->file && fr->frame->line > 0) {
				const char *base = strrchr(fr->frame->file, '/');
				fprintf(f, " (%s:%d)",
					base ? base + 1 : fr->frame->file,
					fr->frame->line);
			}
			if (fr->module)
				fprintf(f, " [%s]", fr->module);
			fputc('\n', f);
		}
	}
	return ferror(f) ? -CP_E_SYS : 0;
}

int cp_write_dump_json(const struct cp_dump *dump, FILE *f)
{
	fprintf(f, "{\"pid\": %d, \"threads\": [", (int)dump->pid);
	for (size_t i = 0; i < dump->nthreads; i++) {
		const struct cp_dump_thread *t = &dump->threads[i];
		fprintf(f, "%s\n  {\"tid\": %d, \"name\": ", i ? "," : "",
			(int)t->tid);
		cp_json_string(f, t->name);
		fputs(", \"state\": ", f);
		cp_json_string(f, cp_task_state_name(t->state));
		fputs(", \"syscall\": ", f);
		const char *sc = (t->state == 'S' || t->state == 'D')
					 ? cp_syscall_name(t->syscall)
					 : NULL;
		if (sc)
			cp_json_string(f, sc);
		else
			fputs("null", f);
		fputs(", \"frames\": [", f);
		for (size_t j = 0; j < t->nframes; j++) {
			const struct cp_dump_frame *fr = &t->frames[j];
			fprintf(f, "%s\n    {\"address\": \"0x%" PRIx64
				   "\", \"function\": ",
				j ? "," : "", fr->address);
			cp_json_string(f, fr->frame->function);
			fputs(", \"file\": ", f);
			if (fr->frame->file)
				cp_json_string(f, fr->frame->file);
			else
				fputs("null", f);
			fprintf(f, ", \"line\": %d, \"module\": ",
				fr->frame->line);
			if (fr->module)
				cp_json_string(f, fr->module);
			else
				fputs("null", f);
			fprintf(f, ", \"inlined\": %s}",
				fr->frame->inlined ? "true" : "false");
		}
		fputs(t->nframes ? "\n  ]}" : "]}", f);
	}
	fputs("\n]}\n", f);
	return ferror(f) ? -CP_E_SYS : 0;
}

/* The location of frame FR: one line, interned.  Returns its id or
 * UINT32_MAX.  */
static uint32_t dump_location(struct cp_profile *p,
			      const struct cp_dump_frame *fr)
{
	const struct cp_frame *f = fr->frame;
	const char *name = f && f->function ? f->function : "[unknown]";
	struct cp_line line = {
		.function = cp_profile_intern(p, name, strlen(name)),
		.file = f && f->file ? cp_profile_intern(p, f->file,
							 strlen(f->file))
				     : 0,
		.line = f ? f->line : 0,
		.inlined = f && f->inlined,
	};
	uint32_t module = fr->module ? cp_profile_intern(p, fr->module,
							 strlen(fr->module))
				     : 0;
	if (line.function == UINT32_MAX || line.file == UINT32_MAX ||
	    module == UINT32_MAX)
		return UINT32_MAX;
	return cp_profile_add_location(p, fr->address, module, &line, 1);
}

int cp_format_dump_profile(const struct cp_dump *dump, struct cp_profile **out)
{
	*out = NULL;
	struct cp_profile *p = cp_profile_new();
	uint32_t *locs = NULL;
	if (!p)
		return -CP_E_NOMEM;
	cp_profile_set_count_type(p, "threads", "count");
	cp_profile_meta(p)->pid = dump->pid;
	for (size_t i = 0; i < dump->nthreads; i++) {
		const struct cp_dump_thread *t = &dump->threads[i];
		uint32_t *grown = realloc(locs, (t->nframes + 1) *
						       sizeof(*locs));
		if (!grown)
			goto nomem;
		locs = grown;
		for (size_t j = 0; j < t->nframes; j++) {
			locs[j] = dump_location(p, &t->frames[j]);
			if (locs[j] == UINT32_MAX)
				goto nomem;
		}
		uint32_t stack = cp_profile_intern_stack(p, locs, t->nframes);
		if (stack == UINT32_MAX ||
		    cp_profile_set_thread_name(p, t->tid, t->name) < 0 ||
		    cp_profile_add(p, t->tid, stack, 1) < 0)
			goto nomem;
	}
	free(locs);
	*out = p;
	return 0;
nomem:
	free(locs);
	cp_profile_free(p);
	return -CP_E_NOMEM;
}

static int format_dump_text_write(const struct cp_format_input *in,
				  const struct cp_format_options *o,
				  FILE *stream)
{
	return cp_write_dump_text(in->dump, o->folded.lines, stream);
}

static int format_dump_json_write(const struct cp_format_input *in,
				  const struct cp_format_options *o,
				  FILE *stream)
{
	(void)o;
	return cp_write_dump_json(in->dump, stream);
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_text = {
	.name = "text",
	.suffixes = { NULL },
	.description = "the stacks as text, one block per thread (like eu-stack)",
	.kinds = CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = false,
	.write = format_dump_text_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_json = {
	.name = "json",
	.suffixes = { NULL },
	.description = "the stacks as one JSON document",
	.kinds = CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = false,
	.write = format_dump_json_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};
