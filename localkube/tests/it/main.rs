//! localkube end to end, one test binary: the `localkube` command line, and pods as real
//! processes through the node runtime (`node_*`) and through the kubelet and `kubectl`
//! (`kubelet_*`). They are here, not in `localkube-node` or `localkube-kubelet`, because
//! they run the executables (`localkube`, `localkube-pod-exec`,
//! `localkube-mariadb-entrypoint`) and cargo builds executables only for the package under
//! test. Most need root; without it they check the refusal or skip, as each says.

mod cli;
mod kubelet_cli;
mod kubelet_clock;
mod kubelet_dns;
mod kubelet_exec;
mod kubelet_faults;
mod kubelet_jobs;
mod kubelet_mariadb;
mod kubelet_udp;
mod kubelet_volumes;
mod kubelet_workloads;
mod node_agent;
mod node_faults;
mod node_mariadb;
mod node_runtime;
mod support;
