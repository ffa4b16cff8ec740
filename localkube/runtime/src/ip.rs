//! Thin wrapper over iproute2's `ip`.
//!
//! Links, addresses and routes inside the pods' network namespaces are set with `ip -n NS`,
//! which enters the namespace for exactly one command. Doing the same with rtnetlink would
//! mean opening a netlink socket from a thread that `setns`-ed into each namespace; `ip`
//! already does that correctly, is on every machine here, and its commands read the same in
//! logs as in a debugging session.

use std::process::Command;

use super::error::{Error, Result};

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|err| Error::Ip {
            args: args.join(" "),
            message: err.to_string(),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::Ip {
            args: args.join(" "),
            message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Runs `ip ARGS` where "already gone" is success (deletes during cleanup).
pub fn ip_ignore_missing(args: &[&str]) -> Result<()> {
    match ip(args) {
        Ok(_) => Ok(()),
        Err(Error::Ip { message, .. }) if already_gone(&message) => Ok(()),
        Err(err) => Err(err),
    }
}

/// Whether `ip`'s error says the object is already gone. A veth whose peer's namespace was
/// just deleted is destroyed by the kernel meanwhile: deleting it then fails with `RTNETLINK
/// answers: No such device` rather than `Cannot find device` (a pod stop failed that way).
fn already_gone(message: &str) -> bool {
    [
        "Cannot find device",
        "No such device",
        "No such file",
        "No such process",
        "does not exist",
        "Invalid argument",
    ]
    .iter()
    .any(|gone| message.contains(gone))
}

/// Names of all network namespaces (`ip netns list`).
pub fn netns_list() -> Result<Vec<String>> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect())
}

/// Names of all links of the root namespace (`ip -o link show`).
pub fn link_list() -> Result<Vec<String>> {
    Ok(ip(&["-o", "link", "show"])?
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect())
}

/// `(name, MAC address)` of every bridge of the root namespace (`ip -o link show type bridge`).
pub fn bridge_macs() -> Result<Vec<(String, String)>> {
    Ok(parse_link_macs(&ip(&[
        "-o", "link", "show", "type", "bridge",
    ])?))
}

/// `(name, MAC)` of each line of `ip -o link show` output that names a `link/ether` address.
pub fn parse_link_macs(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|line| {
            let name = line.split(": ").nth(1)?;
            let name = name.split('@').next().unwrap_or(name);
            let mut words = line.split_whitespace();
            words.find(|word| *word == "link/ether")?;
            Some((name.to_string(), words.next()?.to_ascii_lowercase()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_device_the_kernel_removed_meanwhile_is_already_gone() {
        assert!(super::already_gone("RTNETLINK answers: No such device"));
        assert!(super::already_gone("Cannot find device \"lk1-h3\""));
        assert!(!super::already_gone(
            "RTNETLINK answers: Operation not permitted"
        ));
    }

    #[test]
    fn link_macs_are_read_from_one_line_per_link() {
        let output = "880: lke40b-br: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN mode DEFAULT group default qlen 1000\\    link/ether 02:6c:6b:00:00:01 brd ff:ff:ff:ff:ff:ff\n\
                      1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n\
                      7: veth1@if2: <BROADCAST> mtu 1500\\    link/ether 0A:BB:CC:DD:EE:FF brd ff:ff:ff:ff:ff:ff link-netns x\n";
        assert_eq!(
            super::parse_link_macs(output),
            [
                ("lke40b-br".to_string(), "02:6c:6b:00:00:01".to_string()),
                ("veth1".to_string(), "0a:bb:cc:dd:ee:ff".to_string())
            ]
        );
    }
}
