/* Numbers from command-line text: the whole text must be one number, inside [lo, hi]. The
 * callers word their own usage errors. */
#ifndef MLP_PARSE_NUMBER_H
#define MLP_PARSE_NUMBER_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

bool parse_long_in(const char *text, long lo, long hi, long *out);
bool parse_int_in(const char *text, int lo, int hi, int *out);
bool parse_double_in(const char *text, double lo, double hi, double *out);

#ifdef __cplusplus
}
#endif

#endif
