//! The pod's own resolver: the first `nameserver` of `/etc/resolv.conf`, which in a pod is the
//! cluster DNS (the kubelet writes it). The workload asks it directly, without search domains,
//! as the harness's DNS probe asked the cluster DNS address ([`crate::live::workload`]).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use crate::error::{Error, Result};

/// The pod's resolver configuration.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The first `nameserver` of a resolv.conf's text, on port 53 (`None` without one).
pub fn first_nameserver(text: &str) -> Option<SocketAddr> {
    text.lines()
        .map(|line| line.split(['#', ';']).next().unwrap_or_default())
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver"))
                .then(|| words.next())
                .flatten()
        })
        // A link-local IPv6 server carries its zone (`fe80::1%eth0`): not usable here.
        .find_map(|address| address.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
}

/// The first nameserver of the resolv.conf at `path`.
pub fn nameserver(path: &Path) -> Result<SocketAddr> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    first_nameserver(&text).ok_or_else(|| Error::Workload {
        action: format!("find the DNS server in {}", path.display()),
        reason: "it has no `nameserver` line with an IP address".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // A pod's resolv.conf as the kubelet writes it: the cluster DNS is the first nameserver.
    #[test]
    fn the_first_nameserver_is_the_cluster_dns() {
        let text = "# written by the kubelet\nsearch ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver 8.8.8.8\noptions ndots:5\n";
        assert_eq!(
            first_nameserver(text),
            Some(SocketAddr::from(([10, 96, 0, 10], 53)))
        );
        assert_eq!(
            first_nameserver("nameserver fe80::1%eth0\nnameserver ::1 # local\n"),
            Some("[::1]:53".parse().expect("address"))
        );
        assert_eq!(first_nameserver("search x\n; nameserver 1.2.3.4\n"), None);
    }
}
