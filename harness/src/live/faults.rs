//! Faults: the backend-specific [`FaultDriver`] (processes, nodes, network, external-dns)
//! and the faults every backend does the same way through the API or SQL (RBAC denial,
//! operator scale, annotations, read_only, replication delay, connections, the plugin,
//! upgrades). The runner's recorder gets a `fault` start event once a fault took effect and
//! an end event once it is healed.

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// A fault the driver started and can end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverFault {
    /// The driver's id of the fault (`localkube`'s fault id).
    pub id: Option<u64>,
    /// The in-cluster fault agent's parts of it: (the agent pod's node, the agent's fault
    /// id); a partition has one per pod it cut.
    pub agent_faults: Vec<(String, u64)>,
}

/// How a backend reaches processes, nodes and the network.
pub trait FaultDriver: Send + Sync {
    /// SIGKILL a container; with `keep_down` it is not restarted until [`Self::end`].
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<DriverFault>;
    /// SIGSTOP a container until [`Self::end`].
    fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<DriverFault>;
    /// Stop a node (its pods stop, it goes NotReady) until [`Self::end`].
    fn stop_node(&self, node: &str) -> Result<DriverFault>;
    /// Partition two sets of nodes until [`Self::end`].
    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault>;
    /// Step the wall clock of a pod's `container` to `offset` (`+20s`) from the real clock
    /// until [`Self::end`].
    fn clock_offset(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: &str,
    ) -> Result<DriverFault> {
        let _ = (namespace, pod, container, offset);
        Err(Error::Cluster {
            action: "step a container's wall clock".to_owned(),
            reason: "this backend has no clock-offset fault (localkube has: libfaketime)"
                .to_owned(),
        })
    }
    /// Ends a fault of `kind` (one of the above) the driver started.
    fn end(&self, kind: &str, fault: &DriverFault, detail: &str) -> Result<()>;
    /// The driver's own fault log, for the artifacts (None when it keeps none).
    fn fault_log(&self) -> Option<String> {
        None
    }
    /// The control plane's own log (the API server, kubelet, DNS and proxy), for the
    /// artifacts: the last [`CLUSTER_LOG_BYTES_MAX`] of it (None when the backend's control
    /// plane is not this machine's).
    fn cluster_log(&self) -> Option<String> {
        None
    }
}

/// How much of the end of a control plane's log goes into a failed scenario's artifacts.
pub const CLUSTER_LOG_BYTES_MAX: u64 = 8 << 20;

/// The last `bytes_max` of the file at `path` (from the first whole line within them).
pub fn file_tail(path: &std::path::Path, bytes_max: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(bytes_max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(match (start, text.find('\n')) {
        (0, _) | (_, None) => text.into_owned(),
        (_, Some(newline)) => text[newline + 1..].to_owned(),
    })
}

/// A fault that is in effect and how to end it.
#[derive(Debug, Clone, PartialEq)]
pub enum Undo {
    /// A driver fault.
    Driver {
        /// Its kind (`kill`, `freeze`, `stop-node`, `partition`, `clock-offset`).
        kind: String,
        /// The driver's handle.
        fault: DriverFault,
        /// The node of a `stop-node` (to start it) or other detail.
        detail: String,
    },
    /// Re-apply the operator's rendered RBAC.
    RestoreRbac,
    /// Scale the operator back to this many replicas.
    ScaleOperator(u32),
    /// Set this replication delay (seconds) back on a site.
    ReplicationDelay {
        /// The site's pod.
        pod: String,
    },
    /// Resume the in-cluster stand-in for external-dns (`paused: "false"`).
    ResumeExternalDns,
    /// Run this SQL as root on a site's pod (an `sql` fault's `heal`).
    Sql {
        /// The site's pod.
        pod: String,
        /// The statements.
        sql: String,
    },
}

/// The faults in effect, by kind, in injection order.
#[derive(Debug, Default)]
pub struct ActiveFaults {
    /// (fault kind, detail for the history, undo).
    pub active: Vec<(String, String, Undo)>,
}

/// The `localkube fault` driver: the binary's control socket.
#[derive(Debug, Clone)]
pub struct LocalkubeDriver {
    /// The cluster.
    pub config: crate::playground::localkube::LocalkubeConfig,
}

fn parse_id(output: &str, action: &str) -> Result<DriverFault> {
    let answer: Value = serde_json::from_str(output.trim()).map_err(|e| Error::Cluster {
        action: action.to_owned(),
        reason: format!("unexpected answer {:?}: {e}", output.trim()),
    })?;
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(Error::Cluster {
            action: action.to_owned(),
            reason: error.to_owned(),
        });
    }
    Ok(DriverFault {
        id: answer.get("id").and_then(Value::as_u64),
        agent_faults: Vec::new(),
    })
}

impl FaultDriver for LocalkubeDriver {
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<DriverFault> {
        let target = format!("{namespace}/{pod}");
        let mut args = vec!["kill", target.as_str(), "-c", container];
        if keep_down {
            args.push("--keep-down");
        }
        let out = self.config.fault(&args)?;
        parse_id(&out, &format!("kill {target} {container}"))
    }

    fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<DriverFault> {
        let target = format!("{namespace}/{pod}");
        let out = self.config.fault(&["freeze", &target, "-c", container])?;
        parse_id(&out, &format!("freeze {target} {container}"))
    }

    fn clock_offset(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: &str,
    ) -> Result<DriverFault> {
        // localkube steps every container of the pod that `--clock-faults` names: `mysql`.
        if container != "mysql" {
            return Err(Error::Cluster {
                action: format!("step the wall clock of {namespace}/{pod} {container}"),
                reason: "the harness starts localkube with --clock-faults mysql only".to_owned(),
            });
        }
        let target = format!("{namespace}/{pod}");
        let out = self.config.fault(&["clock-offset", &target, offset])?;
        parse_id(&out, &format!("clock-offset {target} {offset}"))
    }

    fn stop_node(&self, node: &str) -> Result<DriverFault> {
        let out = self.config.fault(&["stop-node", node])?;
        parse_id(&out, &format!("stop node {node}"))
    }

    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault> {
        let out = self
            .config
            .fault(&["partition", &side_a.join(","), &side_b.join(",")])?;
        parse_id(&out, "partition")
    }

    fn end(&self, kind: &str, fault: &DriverFault, detail: &str) -> Result<()> {
        let id = fault.id.map(|id| id.to_string());
        let with_id = |verb: &'static str| -> Vec<String> {
            let mut args = vec![verb.to_owned()];
            args.extend(id.clone());
            args
        };
        let args: Vec<String> = match kind {
            "kill" => with_id("heal"),
            "freeze" => with_id("thaw"),
            "partition" | "clock-offset" => with_id("heal"),
            "stop-node" => vec!["start-node".to_owned(), detail.to_owned()],
            other => {
                return Err(Error::Cluster {
                    action: format!("end a {other} fault"),
                    reason: "the localkube driver did not start it".to_owned(),
                })
            }
        };
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.config.fault(&refs)?;
        parse_id(&out, &format!("end {kind}")).map(|_| ())
    }

    fn fault_log(&self) -> Option<String> {
        std::fs::read_to_string(self.config.state_dir.join("faults.jsonl")).ok()
    }

    fn cluster_log(&self) -> Option<String> {
        file_tail(
            &self.config.state_dir.join("localkube.log"),
            CLUSTER_LOG_BYTES_MAX,
        )
        .ok()
    }
}

/// The operator ClusterRole's rules with `verbs` removed on `resource` (rules naming other
/// resources too are split so only `resource` loses the verbs).
pub fn deny_verbs(rules: &Value, resource: &str, verbs: &[&str]) -> Value {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let resources: Vec<&str> = rule["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !resources.contains(&resource) {
            out.push(rule.clone());
            continue;
        }
        let others: Vec<&str> = resources
            .iter()
            .copied()
            .filter(|r| *r != resource)
            .collect();
        if !others.is_empty() {
            let mut rest = rule.clone();
            rest["resources"] = json!(others);
            out.push(rest);
        }
        let kept: Vec<Value> = rule["verbs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|verb| !verbs.contains(&verb.as_str().unwrap_or_default()))
            .cloned()
            .collect();
        if !kept.is_empty() {
            let mut narrowed = rule.clone();
            narrowed["resources"] = json!([resource]);
            narrowed["verbs"] = Value::Array(kept);
            out.push(narrowed);
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_tail_keeps_whole_lines_of_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("localkube.log");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(
            file_tail(&path, 1024).unwrap(),
            "first line\nsecond line\nthird\n"
        );
        // The last 12 bytes start inside "second line": that partial line is dropped.
        assert_eq!(file_tail(&path, 12).unwrap(), "third\n");
        assert!(file_tail(&dir.path().join("absent.log"), 10).is_err());
    }

    #[test]
    fn denying_verbs_keeps_the_others_and_other_resources() {
        let rules = json!([
            {"apiGroups": ["externaldns.k8s.io"], "resources": ["dnsendpoints"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
            {"apiGroups": [""], "resources": ["services", "pods"], "verbs": ["get", "patch"]},
        ]);
        let denied = deny_verbs(&rules, "dnsendpoints", &["create", "update", "patch"]);
        assert_eq!(denied[0]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(denied[1], rules[1]);
        let pods = deny_verbs(&rules, "pods", &["patch"]);
        assert_eq!(pods[1]["resources"], json!(["services"]));
        assert_eq!(pods[1]["verbs"], json!(["get", "patch"]));
        assert_eq!(pods[2]["resources"], json!(["pods"]));
        assert_eq!(pods[2]["verbs"], json!(["get"]));
    }

    #[test]
    fn driver_answers_are_parsed_and_errors_named() {
        assert_eq!(parse_id("{\"id\":7}\n", "x").unwrap().id, Some(7));
        let error = parse_id("{\"error\":\"no such pod\"}", "kill a/b")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("kill a/b") && error.contains("no such pod"),
            "{error}"
        );
    }
}
