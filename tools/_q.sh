tools/device_run.sh build >/dev/null 2>&1 || { tail -20 out/build.log; grep -m5 error out/build.log; exit 1; }
build-device/test_gpu_gemm_ladder 2>&1 | grep -E "FAIL|passed" | head -8
S="--shape 4096,4096,4096,NT --shape 4096,4096,4096,TN --shape 4096,4096,4096,TT --shape 2048,2048,2048,NT"
build-device/mlp_bench gemm --device gpu --sizes 512:4096 $S --impl tf32_mma,tf32_wgmma,blas_tf32 --quiet --csv $OUT/t.csv >$OUT/t.txt 2>&1
python3 tools/bench_table.py $OUT/t.csv
