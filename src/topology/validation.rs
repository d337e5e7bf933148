//! Kueue's validation of the `kueue.x-k8s.io/podset-*` annotations, with its exact words.
