// Makes a device current on the calling thread through c10's device-generic guard interface, so that code which
// must not include CUDA headers (every file of a build without -DHPCTRAIN_WITH_CUDA) can still bind its threads
// (Note [Current device] in include/hpctrain/train/device.hpp). Same in LibTorch 1.13 and 2.x.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace hpctrain::compat {

// cudaSetDevice(device.index()) for a CUDA device (any non-CPU device with an index); nothing for the CPU or
// meta. Throws c10::Error when LibTorch has no support for the device type.
inline void make_device_current(const c10::Device& device) {
  if (device.is_cpu() || device.is_meta() || !device.has_index()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace hpctrain::compat
