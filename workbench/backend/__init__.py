"""What the backend does on this machine or a stored stack: device, NPU status, op registry, and the NPU
kernel each op runs (`kernels`, from ascend_backend's kernel-selection table); `api` is what notebook 01
and `ascend-workbench kernels` call."""
