#include "cprof/error.h"

static const char *const messages[] = {
#define CP_ERROR(name, msg) [CP_E_##name] = msg,
	CP_ERRORS
#undef CP_ERROR
};

const char *cp_strerror(int code)
{
	/* Widen before negating: -INT_MIN does not fit in an int.  */
	long long magnitude = code < 0 ? -(long long)code : code;
	if (magnitude >= CP_E_COUNT_)
		return "unknown error";
	return messages[magnitude];
}
