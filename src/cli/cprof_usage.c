/* cprof's help texts (cprof.h): each command's usage, printed by
 * cprof COMMAND --help and, all of them, by cprof --help.  */
#include "cli/cprof.h"

const char main_usage[] =
	"Usage: cprof COMMAND [OPTIONS] ARGS...\n"
	"Flame graphs, differences, conversions and reports from folded stacks (what\n"
	"cprof-attach and FlameGraph's stackcollapse scripts write), and timelines\n"
	"from raw timestamped samples (cprof-attach --format raw).\n"
	"\n"
	"Commands:\n"
	"  flamegraph   draw an interactive SVG flame graph\n"
	"  diff         compare two profiles: a differential flame graph or counts\n"
	"  convert      write a profile in another format\n"
	"  report       print the top functions by self and by total samples\n"
	"  timeline     turn raw samples into start/end events or a trace\n"
	"\n"
	"  -h, --help           show this help; cprof COMMAND --help: one command's\n"
	"  -V, --version        show the version\n"
	"\n";

const char flamegraph_usage[] =
	"Usage: cprof flamegraph [OPTIONS] IN [-o OUT.svg]\n"
	"Draw an interactive SVG flame graph of the folded stacks in IN.\n"
	"\n"
	"      --title TEXT         title (default \"Flame Graph\"; \"Icicle Graph\" with\n"
	"                           --inverted)\n"
	"      --width PIXELS       image width (default 1200)\n"
	"      --minwidth PIXELS    leave out frames narrower than this (decimals\n"
	"                           allowed; default 0.1)\n"
	"      --inverted           icicle graph: the root at the top\n"
	"      --colors PALETTE     default (by kind of frame), hot, mem, io, red, green,\n"
	"                           blue, yellow, purple, aqua, orange or gray\n"
	"  -o, --output FILE        where to write the SVG (default: standard output)\n"
	"  -h, --help               show this help\n";

const char diff_usage[] =
	"Usage: cprof diff [OPTIONS] BEFORE AFTER [-o OUT]\n"
	"Compare two profiles.  svg: a differential flame graph, widths from AFTER,\n"
	"a frame red where it grew and blue where it shrank.  folded: one line\n"
	"\"stack BEFORE AFTER\" for every stack of either profile, sorted by stack.\n"
	"\n"
	"      --format FORMAT      one of the formats below (default: the one OUT's\n"
	"                           suffix names, else the first)\n"
	"      --normalize          scale BEFORE to AFTER's total first (rounded to\n"
	"                           whole samples)\n"
	"      --title TEXT         title (default \"Differential Flame Graph\")\n"
	"      --width PIXELS       image width (default 1200)\n"
	"      --minwidth PIXELS    leave out frames narrower than this (default 0.1)\n"
	"      --inverted           icicle graph: the root at the top\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

const char convert_usage[] =
	"Usage: cprof convert IN --format FORMAT [-o OUT]\n"
	"Write the folded stacks in IN in another format.\n"
	"\n"
	"      --format FORMAT      one of the formats below; may be left out when\n"
	"                           OUT's suffix names one\n"
	"  -F, --frequency HZ       the counts are samples taken HZ times a second per\n"
	"                           thread (cprof-attach -F, default 99): pprof and\n"
	"                           speedscope give times (count / HZ) in nanoseconds;\n"
	"                           without it, counts\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

const char report_usage[] =
	"Usage: cprof report [OPTIONS] IN\n"
	"Print the top functions by self samples (the function was running) and by\n"
	"total samples (it was on the stack; counted once per stack, even when it\n"
	"recurses), with percentages of all samples.\n"
	"\n"
	"      --top N              functions in each table (default 10; 0: all)\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

const char timeline_usage[] =
	"Usage: cprof timeline [OPTIONS] RAW [-o OUT]\n"
	"Turn the raw samples in RAW into function start/end events.  For each thread\n"
	"separately, where two consecutive stacks differ (compared frame by frame from\n"
	"the root), the frames of the previous stack end, deepest first, and those of\n"
	"the new one start, outermost first, at the new sample's timestamp.\n"
	"\n"
	"      --format FORMAT      one of the formats below (default: the one OUT's\n"
	"                           suffix names, else the first)\n"
	"      --min-samples N      a frame starts only once it has been on its\n"
	"                           thread's stack in N consecutive samples; it starts\n"
	"                           at the Nth (default 1)\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

const char timeline_epilog[] =
	"\n"
	"RAW is a file of raw samples (cprof-attach --format raw), or - for standard\n"
	"input: lines \"TIMESTAMP TID WEIGHT FRAME;FRAME;...\" in time order, the\n"
	"timestamp in seconds, the weight in periods, frames root first, the stack\n"
	"possibly empty (no WEIGHT without a \"# fields SECONDS TID WEIGHT STACK\"\n"
	"header, as in files from before weights); lines beginning with # are headers\n"
	"(\"# thread TID NAME\", \"# target PID NAME\", \"# frequency HZ\") or comments.\n"
	"In events output TIMESTAMP is written as in RAW and frames still open after\n"
	"the last sample stay open; trace and speedscope close them once their\n"
	"thread's last sample has lasted its weight in periods.  Nothing is written\n"
	"until the whole input is read.\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 usage error or bad input\n"
	"(a malformed line, an input without samples or that cannot be opened).\n";

const char common_usage[] =
	"\n"
	"IN is a file of folded stacks, or - for standard input: lines\n"
	"\"frame;frame;...;frame COUNT\", root first, the count after the last run of\n"
	"spaces or tabs (decimals are rounded half up); blank lines and lines\n"
	"beginning with # are skipped.  A file whose name ends in .raw holds raw\n"
	"samples (cprof-attach --format raw), their weights added up per stack.\n"
	"Output files are written to a temporary file and renamed into place when\n"
	"complete.\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 usage error or bad input\n"
	"(malformed or empty input, an input that cannot be opened).\n";

