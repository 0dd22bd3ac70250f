# Sourced by the H200 scripts from the repository root: unpacks the xz-compressed release
# binaries in .device/ (the GPU machine has no Rust, and one call carries at most 64 MiB) and puts
# cuBLAS on the library path (the CUDA toolkit's, else PyTorch's wheel); sets $cublas.
for f in .device/*.xz; do
  [ -f "${f%.xz}" ] || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$f" "${f%.xz}"
  chmod +x "${f%.xz}"
done
cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -1)
[ -n "$cublas" ] && export LD_LIBRARY_PATH=$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
