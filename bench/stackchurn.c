/* stackchurn: one busy thread whose call stack changes all the time: a
 * random walk through 16 functions to a random depth (up to 24), so a
 * sampler sees a new distinct stack in most samples.  For the memory per
 * distinct stack (issue 15, goal 5).  Prints "ready"; runs until killed.  */
#include <stdint.h>
#include <stdio.h>

static uint64_t rng = 88172645463325252ull;
static volatile uint64_t sink;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

typedef void (*step_fn)(int depth);
static step_fn steps[16];
#define STEP(N) \
	__attribute__((noinline, noipa)) static void churn_##N(int depth) \
	{ \
		if (depth == 0) { \
			for (int i = 0; i < 20000; i++) \
				sink += (uint64_t)i * (uint64_t)i; \
			return; \
		} \
		steps[next_rand() % 16](depth - 1); \
		sink++; \
	}
STEP(0)
STEP(1)
STEP(2)
STEP(3)
STEP(4)
STEP(5)
STEP(6)
STEP(7)
STEP(8)
STEP(9)
STEP(10)
STEP(11)
STEP(12)
STEP(13)
STEP(14)
STEP(15)

int main(void)
{
	steps[0] = churn_0;
	steps[1] = churn_1;
	steps[2] = churn_2;
	steps[3] = churn_3;
	steps[4] = churn_4;
	steps[5] = churn_5;
	steps[6] = churn_6;
	steps[7] = churn_7;
	steps[8] = churn_8;
	steps[9] = churn_9;
	steps[10] = churn_10;
	steps[11] = churn_11;
	steps[12] = churn_12;
	steps[13] = churn_13;
	steps[14] = churn_14;
	steps[15] = churn_15;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		steps[next_rand() % 16]((int)(next_rand() % 24));
}
