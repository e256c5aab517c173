/* An NVTX injection library for tests: loaded by NVTX when NVTX_INJECTION64_PATH names it, it
 * takes over the domain range calls and appends each distinct nesting path it sees, as
 * "domain:outer/inner/...", to the file named by NVTX_RECORD_FILE. A pop with nothing pushed,
 * or ranges still open at exit, are written as lines starting with "UNBALANCED". */
#define _POSIX_C_SOURCE 200809L
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 32, MAX_PATH = 1024, MAX_SEEN = 256 };

struct nvtxDomainRegistration_st {
    char name[64];
};

static FILE *record;
static const char *stack_names[MAX_DEPTH];
static int depth;
static char seen[MAX_SEEN][MAX_PATH];
static int seen_count;

static void record_line(const char *line) {
    if (!record) return;
    fprintf(record, "%s\n", line);
    fflush(record);
}

static void record_path(const char *domain) {
    char path[MAX_PATH];
    int used = snprintf(path, sizeof path, "%s:", domain);
    for (int i = 0; i < depth && used < MAX_PATH; i++)
        used += snprintf(path + used, sizeof path - (size_t)used, i ? "/%s" : "%s", stack_names[i]);
    for (int i = 0; i < seen_count; i++)
        if (strcmp(seen[i], path) == 0) return;
    if (seen_count < MAX_SEEN) strcpy(seen[seen_count++], path);
    record_line(path);
}

static nvtxDomainHandle_t create_domain(const char *name) {
    struct nvtxDomainRegistration_st *domain = calloc(1, sizeof *domain);
    if (domain) snprintf(domain->name, sizeof domain->name, "%s", name);
    return domain;
}

static int push_range(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attributes) {
    const char *name = attributes->messageType == NVTX_MESSAGE_TYPE_ASCII ? attributes->message.ascii : "?";
    if (depth == MAX_DEPTH) {
        record_line("UNBALANCED: nesting deeper than 32");
        return -1;
    }
    stack_names[depth++] = strdup(name);
    record_path(domain ? domain->name : "(default)");
    return depth - 1;
}

static int pop_range(nvtxDomainHandle_t domain) {
    (void)domain;
    if (depth == 0) {
        record_line("UNBALANCED: pop with no open range");
        return -1;
    }
    free((void *)stack_names[--depth]);
    return depth;
}

static void check_closed(void) {
    if (depth != 0) record_line("UNBALANCED: ranges still open at exit");
    if (record) fclose(record);
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)create_domain;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push_range;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop_range;
    const char *path = getenv("NVTX_RECORD_FILE");
    record = path ? fopen(path, "w") : NULL;
    atexit(check_closed);
    return 1;
}
