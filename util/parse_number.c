/* Whole and real numbers from text; see parse_number.h. */
#include "util/parse_number.h"

#include <errno.h>
#include <stdlib.h>

bool parse_long_in(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < lo || value > hi) return false;
    *out = value;
    return true;
}

bool parse_int_in(const char *text, int lo, int hi, int *out) {
    long value;
    if (!parse_long_in(text, lo, hi, &value)) return false;
    *out = (int)value;
    return true;
}

bool parse_double_in(const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end || !(value >= lo && value <= hi)) return false;
    *out = value;
    return true;
}
