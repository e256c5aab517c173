/* NVTX v3 implementation of nvtx_ranges.h: one domain, ranges with a stable color per name so
 * the same phase looks the same in every trace. */
#include "profiling/nvtx_ranges.h"

#include <nvtx3/nvToolsExt.h>
#include <stdint.h>

static nvtxDomainHandle_t mlp_domain(void) {
    static nvtxDomainHandle_t domain;
    if (!domain) domain = nvtxDomainCreateA("mlp_train");
    return domain;
}

/* FNV-1a hash of the name picks one of a few distinguishable colors. */
static uint32_t color_for(const char *name) {
    static const uint32_t palette[] = {0xFF4E79A7, 0xFFF28E2B, 0xFFE15759, 0xFF76B7B2,
                                       0xFF59A14F, 0xFFEDC948, 0xFFB07AA1, 0xFFFF9DA7};
    uint32_t hash = 2166136261u;
    for (const char *p = name; *p; p++) hash = (hash ^ (uint8_t)*p) * 16777619u;
    return palette[hash % (sizeof palette / sizeof palette[0])];
}

void nvtx_range_push(const char *name) {
    nvtxEventAttributes_t attributes = {0};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.colorType = NVTX_COLOR_ARGB;
    attributes.color = color_for(name);
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
    nvtxDomainRangePushEx(mlp_domain(), &attributes);
}

void nvtx_range_pop(void) { nvtxDomainRangePop(mlp_domain()); }
