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
        Err(Error::Ip { message, .. })
            if message.contains("Cannot find device")
                || message.contains("No such file")
                || message.contains("No such process")
                || message.contains("does not exist")
                || message.contains("Invalid argument") =>
        {
            Ok(())
        }
        Err(err) => Err(err),
    }
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
