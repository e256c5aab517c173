/* Collecting, comparing and writing mlp_bench's rows; see results.h. */
#include "bench/results.h"
#include "util/host_memory.h"

#include "util/atomic_file.h"
#include "util/json_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void results_init(results *r, const char *benchmark) {
    memset(r, 0, sizeof *r);
    r->benchmark = benchmark;
}

void results_free(results *r) {
    free(r->rows);
    r->rows = NULL;
    r->count = r->capacity = 0;
}

result_row *results_add(results *r, const char *device, const char *impl, const char *shape,
                        double size, double work) {
    if (r->count == r->capacity) {
        int capacity = r->capacity ? 2 * r->capacity : 64;
        result_row *rows = alloc_or_exit((size_t)capacity * sizeof *rows, "the results");
        if (r->count) memcpy(rows, r->rows, (size_t)r->count * sizeof *rows);
        free(r->rows);
        r->rows = rows;
        r->capacity = capacity;
    }
    result_row *row = &r->rows[r->count++];
    *row = (result_row){.size = size,
                        .work = work,
                        .median_ms = NAN,
                        .transfer_ms = NAN,
                        .vs_library = NAN,
                        .of_copy_bw = NAN,
                        .error = NAN,
                        .status = ROW_OK};
    snprintf(row->device, sizeof row->device, "%s", device);
    if (strlen(impl) >= sizeof row->impl) { /* the registries' names: a programming error */
        fprintf(stderr, "mlp_bench: internal error: the name %s is longer than %zu characters\n", impl,
                sizeof row->impl - 1);
        exit(1);
    }
    snprintf(row->impl, sizeof row->impl, "%s", impl);
    snprintf(row->library, sizeof row->library, "blas");
    snprintf(row->shape, sizeof row->shape, "%s", shape);
    return row;
}

double row_rate(const result_row *row) { return row->work / (row->median_ms * 1e-3) / 1e9; }

static double rate_with_transfer(const result_row *row) {
    return row->work / ((row->median_ms + row->transfer_ms) * 1e-3) / 1e9;
}

static const char *rate_unit(const results *r) {
    return strcmp(r->benchmark, "gemm") == 0 ? "GFLOP/s" : "GB/s";
}

/* The table's optional columns: GEMM has no copy bandwidth to compare with, maxpool no
 * library. */
static bool has_library(const results *r) { return strcmp(r->benchmark, "maxpool") != 0; }
static bool has_copy_bandwidth(const results *r) { return strcmp(r->benchmark, "gemm") != 0; }

static bool timed(const result_row *row) { return row->status == ROW_OK && !isnan(row->median_ms); }

static const result_row *library_row(const results *r, const result_row *row) {
    for (int i = 0; i < r->count; i++) {
        const result_row *other = &r->rows[i];
        if (strcmp(other->impl, row->library) == 0 && strcmp(other->device, row->device) == 0 &&
            strcmp(other->shape, row->shape) == 0 && timed(other))
            return other;
    }
    return NULL;
}

/* CPU rows first, each device's rows in the order they were measured. */
static void order_by_device(results *r) {
    result_row *ordered = malloc((size_t)r->capacity * sizeof *ordered);
    if (!ordered) return; /* the order is cosmetic */
    int next = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->count; i++)
            if ((strcmp(r->rows[i].device, "cpu") == 0) == (pass == 0))
                ordered[next++] = r->rows[i];
    free(r->rows);
    r->rows = ordered;
}

void results_finish(results *r) {
    if (r->count == 0) return;
    order_by_device(r);
    for (int i = 0; i < r->count; i++) {
        result_row *row = &r->rows[i];
        if (!timed(row)) continue;
        const result_row *library = library_row(r, row);
        if (library) row->vs_library = library->median_ms / row->median_ms;
        double copy = r->copy_gb_per_s[strcmp(row->device, "gpu") == 0];
        if (has_copy_bandwidth(r) && copy > 0) row->of_copy_bw = row_rate(row) / copy;
    }
}

/* ---- the table ---- */

static const char *status_name(row_status status) {
    return status == ROW_OK ? "ok" : status == ROW_FAILED ? "FAILED" : "skipped";
}

/* Three or four significant digits without exponents for the usual ranges; "-" for NAN. */
static void format_number(char *text, size_t size, double value) {
    if (isnan(value))
        snprintf(text, size, "-");
    else if (fabs(value) >= 100)
        snprintf(text, size, "%.0f", value);
    else if (fabs(value) >= 10)
        snprintf(text, size, "%.1f", value);
    else if (fabs(value) >= 1)
        snprintf(text, size, "%.2f", value);
    else
        snprintf(text, size, "%.3g", value);
}

static void format_error(const results *r, char *text, size_t size, double error) {
    if (isnan(error))
        snprintf(text, size, "-");
    else if (strcmp(r->benchmark, "maxpool") == 0)
        snprintf(text, size, "%.0f", error); /* mismatches */
    else
        snprintf(text, size, "%.1e", error);
}

enum { COLUMNS_MAX = 14, CELL = 96 };

typedef struct {
    int columns;
    char cells[COLUMNS_MAX][CELL];
} table_line;

static void add_cell(table_line *line, const char *text) {
    snprintf(line->cells[line->columns++], CELL, "%s", text);
}

static void header_line(const results *r, table_line *line) {
    const char *unit = rate_unit(r);
    char with_transfer[32];
    snprintf(with_transfer, sizeof with_transfer, "%s+xfer", unit);
    line->columns = 0;
    const char *names[] = {"device", "bench", "impl", "shape", "median_ms", unit};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) add_cell(line, names[i]);
    if (r->with_transfer) add_cell(line, "xfer_ms"), add_cell(line, with_transfer);
    if (has_library(r)) add_cell(line, "vs_blas");
    if (has_copy_bandwidth(r)) add_cell(line, "of_copy_bw");
    add_cell(line, "error");
    add_cell(line, "status");
    add_cell(line, "note");
}

static void row_line(const results *r, const result_row *row, table_line *line) {
    char number[CELL];
    line->columns = 0;
    add_cell(line, row->device);
    add_cell(line, r->benchmark);
    add_cell(line, row->impl);
    add_cell(line, row->shape);
    format_number(number, sizeof number, row->median_ms), add_cell(line, number);
    format_number(number, sizeof number, row_rate(row)), add_cell(line, number);
    if (r->with_transfer) {
        format_number(number, sizeof number, row->transfer_ms), add_cell(line, number);
        format_number(number, sizeof number, rate_with_transfer(row)), add_cell(line, number);
    }
    if (has_library(r))
        format_number(number, sizeof number, row->vs_library), add_cell(line, number);
    if (has_copy_bandwidth(r)) {
        if (isnan(row->of_copy_bw))
            snprintf(number, sizeof number, "-");
        else
            snprintf(number, sizeof number, "%.0f%%", 100 * row->of_copy_bw);
        add_cell(line, number);
    }
    format_error(r, number, sizeof number, row->error), add_cell(line, number);
    add_cell(line, status_name(row->status));
    add_cell(line, row->note);
}

/* Text columns (the first four, the last two) left-aligned, numbers right-aligned; two spaces
 * between columns, none at the end of the line. */
static void print_line(const table_line *line, const int *widths, FILE *out) {
    char text[COLUMNS_MAX * (CELL + 2)];
    size_t length = 0;
    for (int c = 0; c < line->columns; c++) {
        bool left = c <= 3 || c >= line->columns - 2;
        length += (size_t)snprintf(text + length, sizeof text - length, left ? "%-*s  " : "%*s  ",
                                   widths[c], line->cells[c]);
    }
    while (length > 0 && text[length - 1] == ' ') length--;
    fprintf(out, "%.*s\n", (int)length, text);
}

void results_print_table(const results *r, FILE *out) {
    fprintf(out, "# mlp_bench %s: cpu %d thread%s, OpenBLAS core %s", r->benchmark, r->cpu_threads,
            r->cpu_threads == 1 ? "" : "s", r->blas_core);
    if (r->gpu_name[0]) fprintf(out, "; gpu %s", r->gpu_name);
    fputc('\n', out);
    for (int d = 0; d < 2; d++)
        if (r->copy_gb_per_s[d] > 0)
            fprintf(out, "# %s copy bandwidth (read + write): %.1f GB/s\n", d ? "gpu" : "cpu",
                    r->copy_gb_per_s[d]);
    table_line line;
    int widths[COLUMNS_MAX] = {0};
    for (int i = -1; i < r->count; i++) {
        if (i < 0)
            header_line(r, &line);
        else
            row_line(r, &r->rows[i], &line);
        for (int c = 0; c < line.columns; c++) {
            int length = (int)strlen(line.cells[c]);
            if (length > widths[c]) widths[c] = length;
        }
    }
    for (int i = -1; i < r->count; i++) {
        if (i < 0)
            header_line(r, &line);
        else
            row_line(r, &r->rows[i], &line);
        print_line(&line, widths, out);
    }
}

/* ---- files ---- */

static void csv_number(FILE *file, double value) {
    if (!isnan(value)) fprintf(file, "%.6g", value);
}

/* A CSV field, quoted when it holds a comma or a quote. */
static void csv_text(FILE *file, const char *text) {
    if (!strpbrk(text, ",\"\n")) {
        fputs(text, file);
        return;
    }
    fputc('"', file);
    for (const char *c = text; *c; c++) {
        if (*c == '"') fputc('"', file);
        fputc(*c, file);
    }
    fputc('"', file);
}

static bool write_csv(FILE *file, const void *contents) {
    const results *r = contents;
    fputs("device,benchmark,impl,shape,size,median_ms,rate,unit,transfer_ms,rate_with_transfer,"
          "vs_library,of_copy_bw,error,status,note\n",
          file);
    for (int i = 0; i < r->count; i++) {
        const result_row *row = &r->rows[i];
        fprintf(file, "%s,%s,", row->device, r->benchmark);
        csv_text(file, row->impl), fputc(',', file);
        csv_text(file, row->shape), fputc(',', file);
        csv_number(file, row->size), fputc(',', file);
        csv_number(file, row->median_ms), fputc(',', file);
        csv_number(file, row_rate(row)), fprintf(file, ",%s,", rate_unit(r));
        csv_number(file, row->transfer_ms), fputc(',', file);
        csv_number(file, rate_with_transfer(row)), fputc(',', file);
        csv_number(file, row->vs_library), fputc(',', file);
        csv_number(file, row->of_copy_bw), fputc(',', file);
        csv_number(file, row->error), fprintf(file, ",%s,", status_name(row->status));
        csv_text(file, row->note), fputc('\n', file);
    }
    return !ferror(file);
}

/* Files are written whole or not at all (util/atomic_file.h). */
static bool write_file(const char *path, atomic_file_writer *write, const results *r) {
    char err[1024];
    if (atomic_file_write(path, write, r, err, sizeof err)) return true;
    fprintf(stderr, "mlp_bench: %s\n", err);
    return false;
}

bool results_write_csv(const results *r, const char *path) { return write_file(path, write_csv, r); }

static void json_number(FILE *file, double value) {
    if (isnan(value) || isinf(value))
        fputs("null", file);
    else
        fprintf(file, "%.6g", value);
}

static void json_row(FILE *file, const result_row *row) {
    fputs("    {\"device\": ", file), json_write_string(file, row->device);
    fputs(", \"impl\": ", file), json_write_string(file, row->impl);
    fputs(", \"shape\": ", file), json_write_string(file, row->shape);
    fputs(", \"size\": ", file), json_number(file, row->size);
    fputs(", \"median_ms\": ", file), json_number(file, row->median_ms);
    fputs(", \"rate\": ", file), json_number(file, row_rate(row));
    fputs(", \"transfer_ms\": ", file), json_number(file, row->transfer_ms);
    fputs(", \"rate_with_transfer\": ", file), json_number(file, rate_with_transfer(row));
    fputs(", \"vs_library\": ", file), json_number(file, row->vs_library);
    fputs(", \"of_copy_bw\": ", file), json_number(file, row->of_copy_bw);
    fputs(", \"error\": ", file), json_number(file, row->error);
    fputs(", \"status\": ", file), json_write_string(file, status_name(row->status));
    fputs(", \"note\": ", file), json_write_string(file, row->note);
    fputc('}', file);
}

static bool write_json(FILE *file, const void *contents) {
    const results *r = contents;
    fputs("{\n  \"benchmark\": ", file), json_write_string(file, r->benchmark);
    fputs(",\n  \"unit\": ", file), json_write_string(file, rate_unit(r));
    fprintf(file, ",\n  \"cpu_threads\": %d,\n  \"openblas_core\": ", r->cpu_threads);
    json_write_string(file, r->blas_core);
    fputs(",\n  \"gpu\": ", file);
    if (r->gpu_name[0])
        json_write_string(file, r->gpu_name);
    else
        fputs("null", file);
    fputs(",\n  \"copy_bandwidth_gb_per_s\": {\"cpu\": ", file);
    json_number(file, r->copy_gb_per_s[0] > 0 ? r->copy_gb_per_s[0] : NAN);
    fputs(", \"gpu\": ", file);
    json_number(file, r->copy_gb_per_s[1] > 0 ? r->copy_gb_per_s[1] : NAN);
    fputs("},\n  \"rows\": [\n", file);
    for (int i = 0; i < r->count; i++) {
        json_row(file, &r->rows[i]);
        fputs(i + 1 < r->count ? ",\n" : "\n", file);
    }
    fputs("  ]\n}\n", file);
    return !ferror(file);
}

bool results_write_json(const results *r, const char *path) { return write_file(path, write_json, r); }

int results_report_failures(const results *r, FILE *out) {
    int failures = 0;
    for (int i = 0; i < r->count; i++) {
        const result_row *row = &r->rows[i];
        if (row->status != ROW_FAILED) continue;
        fprintf(out, "mlp_bench: verification FAILED: %s %s %s %s: %s\n", row->device, r->benchmark,
                row->impl, row->shape, row->note);
        failures++;
    }
    return failures;
}
