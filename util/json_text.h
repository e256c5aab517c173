/* JSON text written by hand (mlp_train --json, mlp_bench --json): strings quoted and escaped. */
#ifndef MLP_JSON_TEXT_H
#define MLP_JSON_TEXT_H

#include <stdio.h>

/* "text" with ", \ and control characters escaped. */
void json_write_string(FILE *out, const char *text);

#endif
