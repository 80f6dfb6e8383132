/* The heap report (cprof-attach --heap --format report): a text summary
 * of a heap run for people, with stable line shapes for scripts (plain
 * integers, one fact per line).  A writer: no ptrace here.  */
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/heaptable.h"

#define REPORT_FRAMES 16  /* frames shown per site */
#define TIMELINE_ROWS 20
#define SPARK_WIDTH 60

static void write_stack(const struct cp_profile *p, uint32_t stack, FILE *f)
{
	size_t n;
	const uint32_t *locs = cp_profile_stack(p, stack, &n);
	size_t shown = 0;
	for (size_t i = 0; i < n && shown < REPORT_FRAMES; i++) {
		const struct cp_location *loc = cp_profile_location(p, locs[i]);
		if (!loc)
			continue;
		if (loc->nlines == 0) {
			fprintf(f, "    %#llx", (unsigned long long)loc->address);
			if (loc->module)
				fprintf(f, " (%s)",
					cp_profile_string(p, loc->module));
			fputc('\n', f);
			shown++;
			continue;
		}
		for (uint32_t j = 0; j < loc->nlines && shown < REPORT_FRAMES;
		     j++, shown++) {
			const struct cp_line *l = &loc->lines[j];
			fprintf(f, "    %s", cp_profile_string(p, l->function));
			if (l->inlined)
				fputs(" [inlined]", f);
			if (l->file && l->line > 0)
				fprintf(f, " (%s:%d)",
					cp_profile_string(p, l->file), l->line);
			else if (loc->module)
				fprintf(f, " (%s)",
					cp_profile_string(p, loc->module));
			fputc('\n', f);
		}
	}
	if (shown == REPORT_FRAMES && n > 0)
		fputs("    ...\n", f);
	if (n == 0)
		fputs("    (no stack)\n", f);
}

struct ranked {
	const struct cp_heap_site *site;
	uint64_t key;
};

static int by_key_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return x->site->stack < y->site->stack ? -1 : 1;
}

static int top_sites(const struct cp_heap_summary *s,
		     const struct cp_profile *p, size_t top, bool live,
		     FILE *f)
{
	struct ranked *r = calloc(s->nsites ? s->nsites : 1, sizeof(*r));
	if (!r)
		return -CP_E_NOMEM;
	size_t n = 0;
	for (size_t i = 0; i < s->nsites; i++) {
		const struct cp_heap_site *st = &s->sites[i];
		uint64_t key = live ? st->live_bytes : st->alloc_bytes;
		if (st->alloc_count == 0 || (live && st->live_count == 0))
			continue;
		r[n].site = st;
		r[n].key = key;
		n++;
	}
	qsort(r, n, sizeof(*r), by_key_desc);
	fprintf(f, "\ntop %zu sites by %s\n", top,
		live ? "live bytes at end (leak candidates)"
		     : "bytes allocated");
	if (n == 0)
		fputs("  (none)\n", f);
	for (size_t i = 0; i < n && i < top; i++) {
		const struct cp_heap_site *st = r[i].site;
		if (live)
			fprintf(f,
				"#%zu %llu bytes live in %llu allocations "
				"(%llu bytes in %llu allocations in all)\n",
				i + 1, (unsigned long long)st->live_bytes,
				(unsigned long long)st->live_count,
				(unsigned long long)st->alloc_bytes,
				(unsigned long long)st->alloc_count);
		else
			fprintf(f,
				"#%zu %llu bytes in %llu allocations "
				"(%llu bytes in %llu still live)\n",
				i + 1, (unsigned long long)st->alloc_bytes,
				(unsigned long long)st->alloc_count,
				(unsigned long long)st->live_bytes,
				(unsigned long long)st->live_count);
		write_stack(p, st->stack, f);
	}
	free(r);
	return 0;
}

/* The highest point of TIMELINE[FROM, TO).  */
static const struct cp_heap_point *highest(const struct cp_heap_point *timeline,
					   size_t from, size_t to)
{
	const struct cp_heap_point *top = &timeline[from];
	for (size_t i = from + 1; i < to; i++)
		if (timeline[i].live_bytes > top->live_bytes)
			top = &timeline[i];
	return top;
}

/* Downsampled for the eye: each column of the sparkline and each row of
 * the table is the highest of the spans it stands for, so the peak is
 * always shown.  */
static void timeline(const struct cp_heap_summary *s, FILE *f)
{
	fputs("\nlive bytes over time (the highest of each span)\n", f);
	if (s->npoints == 0) {
		fputs("  (none)\n", f);
		return;
	}
	uint64_t max = highest(s->timeline, 0, s->npoints)->live_bytes;
	uint64_t scale = max ? max : 1;
	static const char levels[] = " .:-=+*#%@";
	size_t width = s->npoints < SPARK_WIDTH ? s->npoints : SPARK_WIDTH;
	fputs("  |", f);
	for (size_t c = 0; c < width; c++) {
		size_t from = c * s->npoints / width;
		size_t to = (c + 1) * s->npoints / width;
		uint64_t v = highest(s->timeline, from, to)->live_bytes;
		fputc(levels[(size_t)((double)v / (double)scale * 9.0 + 0.5)], f);
	}
	fprintf(f, "|  max %llu bytes\n", (unsigned long long)max);
	size_t rows = s->npoints < TIMELINE_ROWS ? s->npoints : TIMELINE_ROWS;
	fprintf(f, "  %10s %14s %12s   (%zu rows of %.3f s)\n", "from s",
		"live bytes", "live allocs", rows,
		s->timeline_span * (double)s->npoints / (double)rows);
	for (size_t r = 0; r < rows; r++) {
		size_t from = r * s->npoints / rows;
		size_t to = (r + 1) * s->npoints / rows;
		const struct cp_heap_point *pt = highest(s->timeline, from, to);
		fprintf(f, "  %10.3f %14llu %12llu\n", s->timeline[from].t,
			(unsigned long long)pt->live_bytes,
			(unsigned long long)pt->live_count);
	}
}

static void sizes(const struct cp_heap_summary *s, FILE *f)
{
	fputs("\nallocation sizes (bytes)\n", f);
	for (unsigned b = 0; b < CP_HEAP_SIZE_BUCKETS; b++) {
		if (!s->sizes[b])
			continue;
		if (b == 0)
			fprintf(f, "  %21s", "0");
		else if (b == 64)
			fprintf(f, "  %10llu - %8s", 1ULL << 63, "max");
		else
			fprintf(f, "  %10llu - %8llu", 1ULL << (b - 1),
				(1ULL << b) - 1);
		double share = 100.0 * (double)s->sizes[b] /
			       (double)(s->allocations ? s->allocations : 1);
		fprintf(f, " %12llu  %5.1f %%\n",
			(unsigned long long)s->sizes[b], share);
	}
	if (s->allocations == 0)
		fputs("  (none)\n", f);
}

int cp_heap_write_report(const struct cp_heap_summary *s,
			 const struct cp_profile *p, size_t top, FILE *f)
{
	const struct cp_profile_meta *m = cp_profile_meta_const(p);
	fputs("cprof heap report\n", f);
	fprintf(f, "target        %d %s\n", (int)m->pid, m->target);
	fprintf(f, "duration      %.3f s\n", s->duration);
	if (s->target_exited)
		fputs("note          the target exited during tracing\n", f);
	if (s->target_exec)
		fputs("note          the target called execve: tracing "
		      "stopped there (the new image is not traced)\n", f);
	if (s->fork_children || s->vfork_children)
		fprintf(f, "note          %llu fork and %llu vfork children "
			"ran untraced\n",
			(unsigned long long)s->fork_children,
			(unsigned long long)s->vfork_children);
	fputs("\ncalls\n", f);
	size_t nentries;
	const struct cp_heap_entry *entries = cp_heap_entries(&nentries);
	if (s->nentries && s->nentries < nentries)
		nentries = s->nentries; /* rows of an older table */
	for (size_t fn = 0; fn < nentries; fn++) {
		fprintf(f, "  %-15s", entries[fn].name);
		if (!s->traced[fn])
			fputs(" -  (not defined by the allocator)\n", f);
		else if (strncmp(s->module[fn], "alias", 5) == 0)
			fprintf(f, " -  (%s)\n", s->module[fn]);
		else
			fprintf(f, " %llu  (%s)\n",
				(unsigned long long)s->calls[fn],
				s->module[fn]);
	}
	double temp = s->allocations
			      ? 100.0 * (double)s->temporary /
					(double)s->allocations
			      : 0.0;
	fprintf(f, "\nallocations   %llu (%llu bytes)\n",
		(unsigned long long)s->allocations,
		(unsigned long long)s->alloc_bytes);
	fprintf(f, "frees         %llu tracked, %llu untracked, %llu of NULL, "
		"%llu double, %llu inside the allocator\n",
		(unsigned long long)s->frees,
		(unsigned long long)s->untracked_frees,
		(unsigned long long)s->null_frees,
		(unsigned long long)s->repeat_frees,
		(unsigned long long)s->internal_frees);
	fprintf(f, "reallocs      %llu (%llu released their old block)\n",
		(unsigned long long)s->reallocs,
		(unsigned long long)s->realloc_releases);
	fprintf(f, "failed        %llu\n", (unsigned long long)s->failed);
	fprintf(f, "temporary     %llu (%.1f %% of allocations: released by "
		"their thread's next allocator call)\n",
		(unsigned long long)s->temporary, temp);
	fprintf(f, "peak live     %llu bytes at %.3f s\n",
		(unsigned long long)s->peak_bytes, s->peak_t);
	fprintf(f, "live at end   %llu allocations, %llu bytes\n",
		(unsigned long long)s->live_count,
		(unsigned long long)s->live_bytes);
	if (s->lost_returns)
		fprintf(f, "lost returns  %llu (calls still running at the "
			"end, or left without returning)\n",
			(unsigned long long)s->lost_returns);
	if (s->events_lost)
		fprintf(f, "lost records  %llu (the kernel could not write "
			"them: the tracer fell a ring behind; the counts "
			"above miss their calls)\n",
			(unsigned long long)s->events_lost);
	timeline(s, f);
	sizes(s, f);
	int rc = top_sites(s, p, top, true, f);
	if (rc == 0)
		rc = top_sites(s, p, top, false, f);
	if (rc < 0)
		return rc;
	return ferror(f) ? -CP_E_SYS : 0;
}
