/* status.c — status names, the thread-local last-error message, library facts. */
#include <stdarg.h>
#include <stdio.h>

#include "conv_internal.h"

static _Thread_local char last_error[1024];

/* A message cut at the buffer's end may end inside a UTF-8 character (a long non-ASCII name quoted in
 * it): the partial character is dropped, so the message stays valid UTF-8. */
static void drop_cut_character(char* text, size_t length) {
    size_t lead = length;
    while (lead > 0 && ((unsigned char)text[lead - 1] & 0xC0) == 0x80) lead--;  /* continuation bytes */
    if (lead == 0) return;
    const unsigned char c = (unsigned char)text[lead - 1];
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (length - (lead - 1) < need) text[lead - 1] = '\0';
}

int conv_set_error(int status, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    const int n = vsnprintf(last_error, sizeof last_error, fmt, args);
    va_end(args);
    if (n >= (int)sizeof last_error) drop_cut_character(last_error, sizeof last_error - 1);
    return status;
}

void conv_clear_error(void) { last_error[0] = '\0'; }

const char* conv_last_error(void) { return last_error; }

const char* conv_status_string(int status) {
    switch (status) {
    case CONV_OK: return "CONV_OK";
    case CONV_ERR_INVALID_ARGUMENT: return "CONV_ERR_INVALID_ARGUMENT";
    case CONV_ERR_UNSUPPORTED: return "CONV_ERR_UNSUPPORTED";
    case CONV_ERR_NO_CUDA_BUILD: return "CONV_ERR_NO_CUDA_BUILD";
    case CONV_ERR_NO_DEVICE: return "CONV_ERR_NO_DEVICE";
    case CONV_ERR_OUT_OF_MEMORY: return "CONV_ERR_OUT_OF_MEMORY";
    case CONV_ERR_CUDA: return "CONV_ERR_CUDA";
    case CONV_ERR_WORKSPACE_TOO_SMALL: return "CONV_ERR_WORKSPACE_TOO_SMALL";
    case CONV_ERR_TOO_LARGE: return "CONV_ERR_TOO_LARGE";
    case CONV_ERR_INTERNAL: return "CONV_ERR_INTERNAL";
    default: return "CONV_ERR_UNKNOWN_STATUS";
    }
}

#ifndef CONV_VERSION_STRING
#error "CONV_VERSION_STRING comes from CMake (pyproject.toml's version)"
#endif

const char* conv_version(void) { return CONV_VERSION_STRING; }

int conv_built_with_cuda(void) {
#ifdef CONV_WITH_CUDA
    return 1;
#else
    return 0;
#endif
}
