//! The kubelet's clean-up.
