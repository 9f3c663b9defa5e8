//! [`Pool::from_devices`]: a long device list cut into slices that keep
//! the API's limits, so a driver need not count.

use crate::types::{Pool, Slice};
use crate::validate::{MAX_DEVICES_PER_SLICE, MAX_DEVICES_WITH_TAINTS_OR_COUNTERS, limited};
use k8s_openapi::api::resource::v1::Device;

impl Pool {
    /// A [`NodeSelection::ThisNode`](crate::NodeSelection::ThisNode) pool
    /// of these devices, in order, cut into as few slices as the limits
    /// allow: 128 devices a slice, 64 in a slice where a device has taints
    /// or consumes counters. No device gives one empty slice (the pool
    /// exists and is empty). Set another node selection on the result
    /// for a network-attached pool.
    pub fn from_devices(devices: Vec<Device>) -> Self {
        let mut slices: Vec<Slice> = Vec::new();
        let mut current: Vec<Device> = Vec::new();
        let mut current_limited = false;
        for device in devices {
            let now_limited = current_limited || limited(&device);
            let max = if now_limited {
                MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
            } else {
                MAX_DEVICES_PER_SLICE
            };
            if current.len() < max {
                current.push(device);
                current_limited = now_limited;
                continue;
            }
            slices.push(Slice {
                devices: std::mem::take(&mut current),
                ..Slice::default()
            });
            current_limited = limited(&device);
            current.push(device);
        }
        if !current.is_empty() || slices.is_empty() {
            slices.push(Slice {
                devices: current,
                ..Slice::default()
            });
        }
        Self {
            slices,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate_pool;
    use k8s_openapi::api::resource::v1::DeviceTaint;

    fn devices(n: usize) -> Vec<Device> {
        (0..n)
            .map(|i| Device {
                name: format!("dev-{i}"),
                ..Device::default()
            })
            .collect()
    }

    fn sizes(pool: &Pool) -> Vec<usize> {
        pool.slices.iter().map(|s| s.devices.len()).collect()
    }

    #[test]
    fn plain_devices_fill_slices_of_128() {
        assert_eq!(sizes(&Pool::from_devices(Vec::new())), [0]);
        assert_eq!(sizes(&Pool::from_devices(devices(128))), [128]);
        assert_eq!(sizes(&Pool::from_devices(devices(300))), [128, 128, 44]);
        let pool = Pool::from_devices(devices(300));
        assert_eq!(pool.slices[1].devices[0].name, "dev-128", "order kept");
        assert!(validate_pool("p", &pool, true).is_ok());
    }

    #[test]
    fn a_tainted_device_caps_its_slice_at_64() {
        let mut list = devices(200);
        list[100].taints = Some(vec![DeviceTaint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..DeviceTaint::default()
        }]);
        let pool = Pool::from_devices(list);
        assert_eq!(sizes(&pool), [100, 64, 36]);
        assert!(validate_pool("p", &pool, true).is_ok());
    }
}
