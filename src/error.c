#include "cprof/error.h"

static const char *const messages[] = {
#define CP_ERROR(name, msg) [CP_E_##name] = msg,
	CP_ERRORS
#undef CP_ERROR
};

const char *cp_strerror(int code)
{
	if (code < 0)
		code = -code;
	if (code >= CP_E_COUNT_)
		return "unknown error";
	return messages[code];
}
