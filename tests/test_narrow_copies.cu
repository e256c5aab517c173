/* The 16-bit copies' bookkeeping (cuda/gpu_narrow_copies.h) and the feed's check that FP16 holds a
 * normalization's pixel values rounded to TF32 (gpu_pixels_fit_tf32_in_fp16): host code, so this
 * runs without a GPU. The arrays are host buffers standing for device ones: the registry only
 * compares addresses. */
#include <cstdint>
#include <vector>

#include "cuda/gpu_narrow_copies.h"
#include "cuda/gpu_state.h" /* gpu_pixels_fit_tf32_in_fp16 */
#include "check.h"

namespace {

/* A copy is read only once it has been written with its array, at the element asked for, and
 * only for ranges inside its array. */
void check_binding() {
    std::vector<float> batch(1000);
    std::vector<uint16_t> copy(1000);
    gpu_narrow_copies copies = {};
    copies.format = NARROW_TF32_IN_FP16;
    gpu_narrow_copy_add_stale(&copies, copy.data(), batch.data(), batch.size());
    CHECK(!gpu_narrow_copy_of(&copies, batch.data(), batch.size()), "a stale copy was handed out");
    gpu_narrow_copy_bind(&copies, copy.data(), batch.data(), batch.size());
    CHECK(gpu_narrow_copy_of(&copies, batch.data(), batch.size()) == copy.data(),
          "the current copy of the whole array is not the copy");
    CHECK(gpu_narrow_copy_of(&copies, batch.data() + 17, 100) == copy.data() + 17,
          "the copy of elements 17.. is not its element 17 (2 bytes an element)");
    CHECK(!gpu_narrow_copy_of(&copies, batch.data() + 990, 11), "a range past the array got a copy");
    CHECK(copies.count == 1, "binding the entry again made %d entries", copies.count);
}

/* A write of any byte of the array without its copy makes the copy stale; a write elsewhere
 * does not; the next write of both makes it current again. */
void check_writes() {
    std::vector<float> array(256), other(256);
    std::vector<uint16_t> copy(256);
    gpu_narrow_copies copies = {};
    copies.format = NARROW_BF16;
    gpu_narrow_copy_bind(&copies, copy.data(), array.data(), array.size());
    gpu_narrow_copies_written(&copies, other.data(), other.size() * sizeof(float));
    CHECK(gpu_narrow_copy_of(&copies, array.data(), array.size()), "a write elsewhere made the copy stale");
    gpu_narrow_copies_written(&copies, reinterpret_cast<char *>(array.data() + 255) + 3, 1);
    CHECK(!gpu_narrow_copy_of(&copies, array.data(), 1), "a write of the array's last byte left the copy current");
    gpu_narrow_copy_bind(&copies, copy.data(), array.data(), array.size());
    CHECK(gpu_narrow_copy_of(&copies, array.data(), 1), "binding did not make the copy current again");
}

/* One array, one copy: binding a second copy to it drops the first. Forgetting drops. */
void check_one_copy_per_array() {
    std::vector<float> array(64);
    std::vector<uint16_t> first(64), second(64);
    gpu_narrow_copies copies = {};
    copies.format = NARROW_BF16;
    gpu_narrow_copy_bind(&copies, first.data(), array.data(), array.size());
    gpu_narrow_copy_bind(&copies, second.data(), array.data(), array.size());
    CHECK(gpu_narrow_copy_of(&copies, array.data(), array.size()) == second.data() && copies.count == 1,
          "the array's copy is not the last one bound, alone (%d entries)", copies.count);
    const gpu_narrow_copies_snapshot current = gpu_narrow_copies_current(&copies);
    CHECK(current.count == 1 && current.current[0] == second.data(), "the snapshot holds %d copies", current.count);
    gpu_narrow_copies_forget_copy(&copies, second.data());
    CHECK(!gpu_narrow_copy_of(&copies, array.data(), array.size()), "a forgotten copy was handed out");
    gpu_narrow_copies_forget_origin(&copies, array.data());
    CHECK(copies.count == 0, "%d entries left after forgetting the array", copies.count);
}

/* A recording's snapshot holds while its copies stay current, and not after one is written. */
void check_snapshots() {
    std::vector<float> x(32), w(32);
    std::vector<uint16_t> x16(32), w16(32);
    gpu_narrow_copies copies = {};
    copies.format = NARROW_BF16;
    gpu_narrow_copy_bind(&copies, x16.data(), x.data(), x.size());
    gpu_narrow_copy_bind(&copies, w16.data(), w.data(), w.size());
    const gpu_narrow_copies_snapshot then = gpu_narrow_copies_current(&copies);
    CHECK(then.count == 2 && gpu_narrow_copies_still_current(&copies, then), "a fresh snapshot does not hold");
    gpu_narrow_copies_written(&copies, w.data(), sizeof(float));
    CHECK(!gpu_narrow_copies_still_current(&copies, then), "a snapshot holds after one of its copies went stale");
}

/* MNIST's and Fashion-MNIST's normalizations fit; values under 2^-14 (pixel 1 at scale 1e-6) or
 * over 65504, or a normalization that is not a number, do not. */
void check_pixels_fit() {
    const struct {
        float scale, shift;
        bool fits;
    } cases[] = {{1.0f / (255 * 0.3081f), -0.1307f / 0.3081f, true},
                 {1.0f / (255 * 0.3530f), -0.2860f / 0.3530f, true},
                 {1.0f / 255, 0.0f, true},
                 {1e-6f, 0.0f, false},
                 {1000.0f, 0.0f, false},
                 {__builtin_nanf(""), 0.0f, false}};
    for (const auto &c : cases)
        CHECK(gpu_pixels_fit_tf32_in_fp16(c.scale, c.shift) == c.fits,
              "pixels at scale %g, shift %g: said %s FP16", c.scale, c.shift,
              c.fits ? "not to fit" : "to fit");
}

} // namespace

int main() {
    check_binding();
    check_writes();
    check_one_copy_per_array();
    check_snapshots();
    check_pixels_fit();
    return test_exit_status("test_narrow_copies");
}
