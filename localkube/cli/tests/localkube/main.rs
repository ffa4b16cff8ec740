//! localkube end to end, one test binary (linking one per file cost minutes on 2 cores):
//! the `localkube` binary, the node agent with real processes (`node_*`), and localkube with
//! the kubelet driven through the real `kubectl` and kube-rs (`kubelet_*`). Most need root;
//! without it they check the one-sentence refusal or return early.

mod support;

mod apiserver_cli;
mod kubelet_agent;
mod kubelet_cli;
mod kubelet_clock;
mod kubelet_daemonset;
mod kubelet_dns;
mod kubelet_exec;
mod kubelet_faults;
mod kubelet_jobs;
mod kubelet_mariadb;
mod kubelet_process;
mod kubelet_termination;
mod kubelet_udp;
mod kubelet_volumes;
mod kubelet_workloads;
mod node_agent;
mod node_faults;
mod node_mariadb;
mod node_runtime;
