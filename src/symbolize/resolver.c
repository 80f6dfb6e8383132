#include "symbolize/resolver.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/unwinder.h"
#include "symbolize/symbols_int.h"
#include "util/hashidx.h"

/* How often the symbolizer thread lets go of the files and debug
 * information of the modules it did not look anything up in since the
 * last time (cp_symbols_release): most of its memory is the DWARF of the
 * modules it read, libc's first (its debug file inflates to about 10 MB),
 * and the addresses of a steady profile in most modules are all named in
 * its first seconds (libc's: the bottom of each stack).  The interval
 * doubles after each release that let go of something, up to the last
 * one, so a module whose new addresses come now and then is read again
 * less and less often.  */
#define RELEASE_IDLE_FIRST_NS 1000000000ull
#define RELEASE_IDLE_LAST_NS 64000000000ull

/* A unit of work for the symbolizer thread.  LOCATION UINT32_MAX with
 * address 0 asks it to re-read the target's modules (after an exec).  */
struct job {
	uint64_t address;
	uint32_t location;
	uint32_t generation;   /* of the profile LOCATION belongs to */
	bool guessed;          /* found without unwind tables */
	bool again;            /* an unknown asked again: not counted as
				* pending (it was applied once already) */
	const struct cp_symbol *symbol; /* the answer */
};

struct job_list {
	struct job *jobs;
	size_t count, cap;
};

struct cp_resolver {
	struct cp_symbols *symbols;
	struct cp_profile *profile;
	/* sampler side only */
	uint64_t epoch;              /* the address space's, last seen */
	bool captured;               /* a capture was made in EPOCH */
	uint32_t generation;         /* PROFILE's; bumped by a rebind */
	size_t pending;              /* PROFILE's addresses not named yet */
	/* The profile before the last rebind, until its names are in (the
	 * caller takes it then); NULL when none.  */
	struct cp_profile *retiring;
	size_t retiring_pending;
	struct cp_hashidx index;     /* address -> location */
	uint64_t *addresses;         /* by location id */
	size_t addresses_cap;
	struct job_list outbox;      /* not yet handed over */
	bool capture;                /* an address the last capture lacks */
	unsigned ticks_to_retry;     /* collects until unknowns are retried */
	unsigned retry_interval;     /* doubles while retries name nothing */
	/* symbolizer thread only */
	struct job_list unknown;     /* answered "[unknown]": asked again */
	uint64_t unknown_generation; /* the symbols' generation they saw */
	/* shared, under LOCK */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;         /* work arrived, or quit (CLOCK_MONOTONIC) */
	pthread_cond_t idle;         /* the thread emptied its queue */
	struct job_list todo;
	struct job_list done;
	bool busy;                   /* the thread holds a batch */
	bool quit;
	bool retry;                  /* ask the unknown addresses again */
	size_t nunknown;             /* UNKNOWN.count, for the sampler */
	size_t named_again;          /* unknowns since named, in all */
	uint64_t release_ns;         /* symbolizer thread only: idle time
				      * before cp_symbols_release */
};

static bool push(struct job_list *list, struct job job)
{
	if (list->count == list->cap) {
		size_t cap = list->cap ? list->cap * 2 : 256;
		struct job *grown = realloc(list->jobs, cap * sizeof(*grown));
		if (!grown)
			return false;
		list->jobs = grown;
		list->cap = cap;
	}
	list->jobs[list->count++] = job;
	return true;
}

static void swap(struct job_list *a, struct job_list *b)
{
	struct job_list t = *a;
	*a = *b;
	*b = t;
}

/* Ask the symbolizer again for the addresses it did not know: a library
 * mapped while it looked (the loader between its mmap and mprotect), a
 * re-read that came too early.  Those named now go to DONE.  Called
 * without LOCK.  FORCE: even when the modules did not change (in a new
 * epoch the first lookup may re-read the mappings).  */
static void retry_unknown(struct cp_resolver *res, bool force)
{
	uint64_t generation = cp_symbols_generation(res->symbols);
	if (res->unknown.count == 0 ||
	    (!force && generation == res->unknown_generation))
		return;
	cp_symbols_new_epoch(res->symbols);
	size_t kept = 0, named = 0;
	for (size_t i = 0; i < res->unknown.count; i++) {
		struct job job = res->unknown.jobs[i];
		job.again = true;
		job.symbol = cp_symbols_lookup(res->symbols, job.address);
		if (cp_symbols_unknown(job.symbol)) {
			res->unknown.jobs[kept++] = job;
			continue;
		}
		pthread_mutex_lock(&res->lock);
		push(&res->done, job);
		pthread_mutex_unlock(&res->lock);
		named++;
	}
	res->unknown.count = kept;
	res->unknown_generation = cp_symbols_generation(res->symbols);
	pthread_mutex_lock(&res->lock);
	res->named_again += named;
	res->nunknown = kept;
	pthread_mutex_unlock(&res->lock);
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait on WAKE (LOCK held) until DEADLINE_NS (CLOCK_MONOTONIC; 0: for
 * ever).  False when the deadline passed.  */
static bool wait_wake(struct cp_resolver *res, uint64_t deadline_ns)
{
	if (deadline_ns == 0) {
		pthread_cond_wait(&res->wake, &res->lock);
		return true;
	}
	struct timespec until = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ull),
		.tv_nsec = (long)(deadline_ns % 1000000000ull),
	};
	return pthread_cond_timedwait(&res->wake, &res->lock, &until) !=
	       ETIMEDOUT;
}

/* Let go of the modules not looked up in since the last call (called
 * without LOCK), and give the memory freed back to the system (the
 * thread's malloc arena keeps it otherwise).  */
static void release_modules(struct cp_resolver *res)
{
	if (cp_symbols_release(res->symbols) == 0)
		return;
	malloc_trim(0);
	if (res->release_ns < RELEASE_IDLE_LAST_NS)
		res->release_ns *= 2;
}

/* The addresses of BATCH up to its first re-read of the modules (an
 * exec), handed to the symbolizer before they are looked up, so that it
 * reads what they need of each debug file at once.  */
static void prefetch(struct cp_resolver *res, const struct job_list *batch)
{
	uint64_t *addresses = malloc(batch->count * sizeof(*addresses) + 1);
	size_t n = 0;
	if (!addresses)
		return;
	for (size_t i = 0; i < batch->count; i++) {
		if (batch->jobs[i].location == UINT32_MAX)
			break;
		addresses[n++] = batch->jobs[i].address;
	}
	cp_symbols_prefetch(res->symbols, addresses, n);
	free(addresses);
}

static void *symbolizer_main(void *arg)
{
	struct cp_resolver *res = arg;
	/* Yield the CPU to the sampling thread: it must not be preempted by
	 * us while it holds a target thread stopped.  */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	struct job_list batch = {0};
	pthread_mutex_lock(&res->lock);
	uint64_t release_at = 0;     /* 0: nothing read, no release due */
	for (;;) {
		size_t read;
		uint64_t released;
		cp_symbols_read_stats(res->symbols, &read, &released);
		if (read == 0)
			release_at = 0;
		else if (release_at == 0)
			release_at = monotonic_ns() + res->release_ns;
		while (release_at != 0 && monotonic_ns() >= release_at) {
			pthread_mutex_unlock(&res->lock);
			release_modules(res);
			pthread_mutex_lock(&res->lock);
			cp_symbols_read_stats(res->symbols, &read, &released);
			release_at = read > 0 ? monotonic_ns() + res->release_ns
					      : 0;
		}
		while (res->todo.count == 0 && !res->quit && !res->retry) {
			res->busy = false;
			pthread_cond_broadcast(&res->idle);
			if (!wait_wake(res, release_at))
				break;
		}
		if (res->todo.count == 0 && !res->quit && !res->retry)
			continue;       /* the release is due */
		if (res->todo.count == 0 && res->quit)
			break;
		res->busy = true;
		bool retry = res->retry;
		res->retry = false;
		batch.count = 0;
		swap(&batch, &res->todo);
		pthread_mutex_unlock(&res->lock);
		if (retry)
			retry_unknown(res, true);
		/* One batch is about one tick's new addresses: it may re-read
		 * the target's mappings once for addresses in no module.  */
		cp_symbols_new_epoch(res->symbols);
		prefetch(res, &batch);
		for (size_t i = 0; i < batch.count; i++) {
			struct job *job = &batch.jobs[i];
			if (job->location == UINT32_MAX)
				cp_symbols_refresh(res->symbols);
			else
				job->symbol = cp_symbols_lookup(res->symbols,
								job->address);
		}
		/* Answered "[unknown]": applied now, asked again later.  */
		for (size_t i = 0; i < batch.count; i++)
			if (batch.jobs[i].location != UINT32_MAX &&
			    cp_symbols_unknown(batch.jobs[i].symbol))
				push(&res->unknown, batch.jobs[i]);
		retry_unknown(res, false);
		pthread_mutex_lock(&res->lock);
		res->nunknown = res->unknown.count;
		for (size_t i = 0; i < batch.count; i++)
			if (batch.jobs[i].location != UINT32_MAX)
				push(&res->done, batch.jobs[i]);
	}
	/* The last chance for the unknown ones, after every batch.  */
	pthread_mutex_unlock(&res->lock);
	retry_unknown(res, true);
	pthread_mutex_lock(&res->lock);
	res->busy = false;
	pthread_cond_broadcast(&res->idle);
	pthread_mutex_unlock(&res->lock);
	free(batch.jobs);
	free(res->unknown.jobs);
	return NULL;
}

int cp_resolver_start(struct cp_symbols *symbols, struct cp_profile *profile,
		      struct cp_resolver **out)
{
	struct cp_resolver *res = calloc(1, sizeof(*res));
	if (!res)
		return -CP_E_NOMEM;
	res->symbols = symbols;
	res->profile = profile;
	/* A profile meets a few compile units of each library: their debug
	 * files are read by unit, not decompressed whole (symbols_int.h).  */
	cp_symbols_set_lazy(symbols, true);
	res->epoch = cp_addrspace_epoch(cp_symbols_addrspace(symbols));
	res->retry_interval = 1;
	res->ticks_to_retry = 1;
	res->release_ns = RELEASE_IDLE_FIRST_NS;
	pthread_mutex_init(&res->lock, NULL);
	/* The release deadline is on the monotonic clock: a change of the
	 * wall clock must not make it early or late.  */
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&res->wake, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&res->idle, NULL);
	if (pthread_create(&res->thread, NULL, symbolizer_main, res) != 0) {
		pthread_mutex_destroy(&res->lock);
		pthread_cond_destroy(&res->wake);
		pthread_cond_destroy(&res->idle);
		free(res);
		return -CP_E_SYS;
	}
	*out = res;
	return 0;
}

struct addr_key {
	const struct cp_resolver *res;
	uint64_t address;
};

static bool addr_eq(const void *ctx, uint32_t id)
{
	const struct addr_key *k = ctx;
	return k->res->addresses[id] == k->address;
}

uint32_t cp_resolver_location(struct cp_resolver *res, uint64_t address)
{
	/* The target exec'ed (cp_addrspace_exec): what its addresses meant
	 * before is no guide.  */
	uint64_t epoch = cp_addrspace_epoch(cp_symbols_addrspace(res->symbols));
	if (epoch != res->epoch) {
		res->epoch = epoch;
		res->captured = false;
		cp_resolver_reset(res);
	}
	uint64_t hash = cp_hash_u64(address);
	struct addr_key key = {res, address};
	uint32_t id = cp_hashidx_find(&res->index, hash, addr_eq, &key);
	if (id != UINT32_MAX)
		return id;
	/* A frame the unwinder found without unwind tables is a location
	 * of its own (its name is marked), at the same address.  */
	uint64_t pc = cp_unwind_address(address);
	id = cp_profile_add_location(res->profile, pc, 0, NULL, 0);
	if (id == UINT32_MAX)
		return id;
	if (id >= res->addresses_cap) {
		size_t cap = res->addresses_cap ? res->addresses_cap * 2 : 1024;
		while (cap <= id)
			cap *= 2;
		uint64_t *grown = realloc(res->addresses, cap * sizeof(*grown));
		if (!grown)
			return UINT32_MAX;
		res->addresses = grown;
		res->addresses_cap = cap;
	}
	res->addresses[id] = address;
	res->pending++;
	/* Its module is kept while the target lives, before the
	 * symbolizer thread (which may lag far behind under load) looks:
	 * a library may be unloaded by then, the target gone.  */
	if (!res->capture && (!res->captured ||
			      !cp_symbols_capture_has(res->symbols, pc)))
		res->capture = true;
	if (!cp_hashidx_insert(&res->index, hash, id) ||
	    !push(&res->outbox,
		  (struct job){.address = pc, .location = id,
			       .generation = res->generation,
			       .guessed = pc != address}))
		return UINT32_MAX;
	return id;
}

/* Turn a symbolizer answer into the location's lines.  */
static void apply(struct cp_resolver *res, const struct job *job)
{
	const struct cp_symbol *sym = job->symbol;
	struct cp_profile *p;
	/* A profile taken by the caller is no longer ours to change (an
	 * unknown address of it named late is dropped).  */
	if (job->generation == res->generation) {
		p = res->profile;
		if (!job->again && res->pending)
			res->pending--;
	} else if (res->retiring && job->generation + 1 == res->generation) {
		p = res->retiring;
		if (!job->again && res->retiring_pending)
			res->retiring_pending--;
	} else {
		return;
	}
	struct cp_line lines[32];
	size_t n = sym->nframes < 32 ? sym->nframes : 32;
	for (size_t i = 0; i < n; i++) {
		const struct cp_frame *f = &sym->frames[i];
		lines[i].function = cp_profile_intern(p, f->function,
						      strlen(f->function));
		lines[i].file = f->file ? cp_profile_intern(p, f->file,
							    strlen(f->file))
					: 0;
		lines[i].line = f->line;
		lines[i].inlined = f->inlined;
	}
	/* A caller the unwinder found without unwind tables: its function
	 * says so, in every output ("main_[fp]", cprof-attach(1)).  */
	if (n > 0 && job->guessed) {
		char marked[1024];
		int len = snprintf(marked, sizeof(marked), "%s_[fp]",
				   sym->frames[n - 1].function);
		if (len > 0 && (size_t)len < sizeof(marked))
			lines[n - 1].function =
				cp_profile_intern(p, marked, (size_t)len);
	}
	uint32_t module = sym->module ? cp_profile_intern(p, sym->module,
							  strlen(sym->module))
				      : 0;
	cp_profile_set_location(p, job->location, module, lines, (uint32_t)n);
	if (sym->module_path && sym->module_end > sym->module_start) {
		uint32_t file = cp_profile_intern(p, sym->module_path,
						  strlen(sym->module_path));
		uint32_t build_id =
			sym->build_id ? cp_profile_intern(p, sym->build_id,
							  strlen(sym->build_id))
				      : 0;
		uint32_t mapping = cp_profile_add_mapping(
			p, sym->module_start, sym->module_end, 0, file, build_id);
		cp_profile_set_location_mapping(p, job->location, mapping);
	}
}

static void collect(struct cp_resolver *res, bool wait_idle)
{
	struct job_list finished = {0};
	if (res->capture && !wait_idle) {
		res->capture = false;
		res->captured = true;
		cp_symbols_capture(res->symbols);
	}
	pthread_mutex_lock(&res->lock);
	if (res->outbox.count > 0) {
		for (size_t i = 0; i < res->outbox.count; i++)
			push(&res->todo, res->outbox.jobs[i]);
		res->outbox.count = 0;
		pthread_cond_signal(&res->wake);
	}
	/* Unknown addresses are asked again after 1, 2, 4, ... 64 ticks
	 * while that names none of them, and at the end.  */
	if (!wait_idle && res->nunknown > 0 && --res->ticks_to_retry == 0) {
		if (res->named_again > 0)
			res->retry_interval = 1;
		else if (res->retry_interval < 64)
			res->retry_interval *= 2;
		res->named_again = 0;
		res->ticks_to_retry = res->retry_interval;
		res->retry = true;
		pthread_cond_signal(&res->wake);
	}
	while (wait_idle && (res->busy || res->todo.count > 0 || res->retry))
		pthread_cond_wait(&res->idle, &res->lock);
	swap(&finished, &res->done);
	pthread_mutex_unlock(&res->lock);
	for (size_t i = 0; i < finished.count; i++)
		apply(res, &finished.jobs[i]);
	free(finished.jobs);
}

void cp_resolver_collect(struct cp_resolver *res)
{
	collect(res, false);
}

void cp_resolver_reset(struct cp_resolver *res)
{
	/* Addresses asked before the exec are resolved (or not) with the
	 * old image; the refresh job is queued after them.  */
	push(&res->outbox, (struct job){.location = UINT32_MAX});
	cp_hashidx_free(&res->index);
}

int cp_resolver_rebind(struct cp_resolver *res, struct cp_profile *profile)
{
	if (res->retiring)
		return -CP_E_BUSY;
	res->retiring = res->profile;
	res->retiring_pending = res->pending;
	res->profile = profile;
	res->pending = 0;
	res->generation++;
	/* Locations are per profile: every address is new to this one.  */
	cp_hashidx_free(&res->index);
	return 0;
}

struct cp_profile *cp_resolver_retired(struct cp_resolver *res, bool wait)
{
	if (!res->retiring)
		return NULL;
	if (wait && res->retiring_pending)
		collect(res, true);
	else
		collect(res, false);
	if (res->retiring_pending)
		return NULL;
	struct cp_profile *done = res->retiring;
	res->retiring = NULL;
	return done;
}

void cp_resolver_finish(struct cp_resolver *res)
{
	if (!res)
		return;
	collect(res, true);
	pthread_mutex_lock(&res->lock);
	res->quit = true;
	pthread_cond_signal(&res->wake);
	pthread_mutex_unlock(&res->lock);
	pthread_join(res->thread, NULL);
	collect(res, false);
	pthread_mutex_destroy(&res->lock);
	pthread_cond_destroy(&res->wake);
	pthread_cond_destroy(&res->idle);
	cp_hashidx_free(&res->index);
	free(res->addresses);
	free(res->outbox.jobs);
	free(res->todo.jobs);
	free(res->done.jobs);
	free(res);
}
