//! Pod JSON to the node runtime's [`PodSpec`]: containers, env (value, fieldRef,
//! secretKeyRef, configMapKeyRef, envFrom, Service link variables), volumes (emptyDir,
//! configMap, secret, downwardAPI, projected incl. serviceAccountToken, PVC, hostPath),
//! probes, restartPolicy and grace, `hostNetwork`, and the default service-account volume at
//! [`SA_MOUNT_PATH`] as the ServiceAccount admission plugin adds it.
//!
//! `hostPID`, `securityContext.privileged` and `capabilities` need no translation: localkube
//! gives no pod a PID namespace of its own (every container sees the host's processes in
//! `/proc`, which is the host's: nothing mounts another), and every container runs as root
//! with the full capability set of localkube itself (nothing drops any), so a privileged
//! container gets what it asks for, and an unprivileged one more than it would on a node
//! (docs/design/localkube.md, "What the in-cluster fault agent needs").

use super::error::{Error, Result};
use base64::Engine;
use localkube_apiserver::{meta, Cluster};
use localkube_runtime::{
    ContainerPort, ContainerSpec, EnvValue, EnvVar, HostPathType, PodSpec, Probe, ProbeHandler,
    ProbePort, RestartPolicy, VolumeFile, VolumeMount, VolumeSource, VolumeSpec,
};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::time::Duration;

/// Where the default service-account volume is mounted.
pub const SA_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Name of the injected service-account volume.
pub const SA_VOLUME: &str = "kube-api-access-localkube";
/// Lifetime of the default service-account token (kube-apiserver's 3607 s).
pub const SA_TOKEN_SECONDS: i64 = 3607;

/// What translation needs besides the Pod.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The cluster (for configMaps, secrets, services, token minting).
    pub cluster: &'a Cluster,
    /// ClusterIP of the `kubernetes` Service.
    pub kubernetes_ip: Ipv4Addr,
}

fn arr<'a>(v: &'a Value, p: &str) -> Vec<&'a Value> {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn strings(v: &Value, p: &str) -> Vec<String> {
    arr(v, p)
        .into_iter()
        .map(|s| {
            s.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| s.to_string())
        })
        .collect()
}

fn opt_str(v: &Value, p: &str) -> Option<String> {
    v.pointer(p)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn secs(v: &Value, p: &str, default: u64) -> Duration {
    Duration::from_secs(v.pointer(p).and_then(Value::as_u64).unwrap_or(default))
}

/// The keys and values of a ConfigMap (`data` and `binaryData`), or `None` when absent.
fn config_map(c: &Cluster, ns: &str, name: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let cm = c.store.get("/configmaps", ns, name)?;
    let mut out = Vec::new();
    if let Some(d) = cm.get("data").and_then(Value::as_object) {
        for (k, v) in d {
            out.push((
                k.clone(),
                v.as_str().unwrap_or_default().as_bytes().to_vec(),
            ));
        }
    }
    if let Some(d) = cm.get("binaryData").and_then(Value::as_object) {
        for (k, v) in d {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or_default())
                .unwrap_or_default();
            out.push((k.clone(), b));
        }
    }
    Some(out)
}

/// The decoded keys of a Secret, or `None` when absent.
fn secret(c: &Cluster, ns: &str, name: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let s = c.store.get("/secrets", ns, name)?;
    let mut out = Vec::new();
    if let Some(d) = s.get("data").and_then(Value::as_object) {
        for (k, v) in d {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or_default())
                .unwrap_or_default();
            out.push((k.clone(), b));
        }
    }
    if let Some(d) = s.get("stringData").and_then(Value::as_object) {
        for (k, v) in d {
            out.push((
                k.clone(),
                v.as_str().unwrap_or_default().as_bytes().to_vec(),
            ));
        }
    }
    Some(out)
}

fn lookup_key(
    data: Option<Vec<(String, Vec<u8>)>>,
    kind: &str,
    name: &str,
    key: &str,
    optional: bool,
) -> Result<Option<String>> {
    match data {
        None if optional => Ok(None),
        None => Err(Error::Config(format!("{kind} \"{name}\" not found"))),
        Some(d) => match d.into_iter().find(|(k, _)| k == key) {
            Some((_, v)) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
            None if optional => Ok(None),
            None => Err(Error::Config(format!(
                "couldn't find key {key} in {kind} {name}"
            ))),
        },
    }
}

/// `metadata.labels['k']` / `metadata.annotations['k']` / plain metadata and spec fields.
fn field_value(pod: &Value, path: &str) -> Result<Option<EnvValue>> {
    let lit = |s: &str| Ok(Some(EnvValue::Literal(s.to_string())));
    match path {
        "metadata.name" => lit(meta::name(pod)),
        "metadata.namespace" => lit(meta::namespace(pod)),
        "metadata.uid" => lit(meta::uid_of(pod)),
        "spec.nodeName" => lit(meta::str_at(pod, "/spec/nodeName")),
        "spec.serviceAccountName" => lit(meta::str_at(pod, "/spec/serviceAccountName")),
        "status.podIP" | "status.podIPs" => Ok(Some(EnvValue::PodIp)),
        "status.hostIP" | "status.hostIPs" => Ok(Some(EnvValue::HostIp)),
        "metadata.labels" => lit(&map_lines(pod.pointer("/metadata/labels"))),
        "metadata.annotations" => lit(&map_lines(pod.pointer("/metadata/annotations"))),
        _ => {
            for (prefix, field) in [
                ("metadata.labels['", "labels"),
                ("metadata.annotations['", "annotations"),
            ] {
                if let Some(k) = path.strip_prefix(prefix).and_then(|r| r.strip_suffix("']")) {
                    let v = pod
                        .pointer(&format!("/metadata/{field}"))
                        .and_then(|m| m.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    return lit(v);
                }
            }
            Err(Error::Config(format!(
                "unsupported fieldRef fieldPath {path:?}"
            )))
        }
    }
}

/// `key="value"` lines, sorted, as the downward API renders label and annotation maps.
fn map_lines(m: Option<&Value>) -> String {
    let mut lines: Vec<String> = m
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}={:?}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    lines.sort();
    lines.join("\n")
}

/// `resourceFieldRef`: the container's own request/limit, or the node's allocatable.
fn resource_value(container: Option<&Value>, resource: &str) -> String {
    let (section, name) = resource.split_once('.').unwrap_or(("limits", resource));
    let set = container
        .and_then(|c| c.pointer(&format!("/resources/{section}/{name}")))
        .and_then(Value::as_str)
        .map(str::to_string);
    set.unwrap_or_else(|| match name {
        "cpu" => "2".into(),
        "memory" => (8u64 << 30).to_string(),
        _ => "0".into(),
    })
}

/// Kubernetes' Service link variables (`enableServiceLinks`) and the `kubernetes` Service's.
fn service_env(ctx: &Context<'_>, pod: &Value) -> Vec<EnvVar> {
    let ns = meta::namespace(pod);
    let links = pod
        .pointer("/spec/enableServiceLinks")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let (svcs, _) = ctx.cluster.store.list("/services", None);
    let mut out = Vec::new();
    for s in svcs {
        let sns = meta::namespace(&s);
        let name = meta::name(&s);
        let is_master = sns == "default" && name == "kubernetes";
        if !(is_master || (links && sns == ns)) {
            continue;
        }
        let ip = meta::str_at(&s, "/spec/clusterIP");
        if ip.is_empty() || ip == "None" {
            continue;
        }
        let prefix = name.to_uppercase().replace('-', "_");
        let ports = arr(&s, "/spec/ports");
        let Some(first) = ports.first() else { continue };
        let port = |p: &Value| p.get("port").and_then(Value::as_u64).unwrap_or(0);
        let proto = |p: &Value| {
            p.get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_string()
        };
        out.push(EnvVar::literal(format!("{prefix}_SERVICE_HOST"), ip));
        out.push(EnvVar::literal(
            format!("{prefix}_SERVICE_PORT"),
            port(first).to_string(),
        ));
        for p in &ports {
            if let Some(pn) = p
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                out.push(EnvVar::literal(
                    format!(
                        "{prefix}_SERVICE_PORT_{}",
                        pn.to_uppercase().replace('-', "_")
                    ),
                    port(p).to_string(),
                ));
            }
        }
        out.push(EnvVar::literal(
            format!("{prefix}_PORT"),
            format!("{}://{ip}:{}", proto(first).to_lowercase(), port(first)),
        ));
        for p in &ports {
            let pr = proto(p);
            let base = format!("{prefix}_PORT_{}_{}", port(p), pr.to_uppercase());
            out.push(EnvVar::literal(
                base.clone(),
                format!("{}://{ip}:{}", pr.to_lowercase(), port(p)),
            ));
            out.push(EnvVar::literal(format!("{base}_PROTO"), pr.to_lowercase()));
            out.push(EnvVar::literal(format!("{base}_PORT"), port(p).to_string()));
            out.push(EnvVar::literal(format!("{base}_ADDR"), ip));
        }
    }
    // The kubernetes Service is reached at its ClusterIP through the proxy.
    out.retain(|e| !e.name.starts_with("KUBERNETES_SERVICE_HOST"));
    out.insert(
        0,
        EnvVar::literal("KUBERNETES_SERVICE_HOST", ctx.kubernetes_ip.to_string()),
    );
    out
}

fn env(ctx: &Context<'_>, pod: &Value, c: &Value) -> Result<Vec<EnvVar>> {
    let ns = meta::namespace(pod);
    let mut out = service_env(ctx, pod);
    for from in arr(c, "/envFrom") {
        let prefix = meta::str_at(from, "/prefix");
        let (data, kind, name, optional) = if let Some(r) = from.get("configMapRef") {
            let n = meta::str_at(r, "/name");
            (
                config_map(ctx.cluster, ns, n),
                "configmap",
                n,
                r.get("optional") == Some(&Value::Bool(true)),
            )
        } else if let Some(r) = from.get("secretRef") {
            let n = meta::str_at(r, "/name");
            (
                secret(ctx.cluster, ns, n),
                "secret",
                n,
                r.get("optional") == Some(&Value::Bool(true)),
            )
        } else {
            continue;
        };
        match data {
            None if optional => {}
            None => return Err(Error::Config(format!("{kind} \"{name}\" not found"))),
            Some(d) => {
                for (k, v) in d {
                    out.push(EnvVar::literal(
                        format!("{prefix}{k}"),
                        String::from_utf8_lossy(&v).into_owned(),
                    ));
                }
            }
        }
    }
    for e in arr(c, "/env") {
        let name = meta::str_at(e, "/name").to_string();
        let value = if let Some(vf) = e.get("valueFrom") {
            if let Some(f) = vf.get("fieldRef") {
                field_value(pod, meta::str_at(f, "/fieldPath"))?
            } else if let Some(r) = vf.get("resourceFieldRef") {
                Some(EnvValue::Literal(resource_value(
                    Some(c),
                    meta::str_at(r, "/resource"),
                )))
            } else if let Some(r) = vf.get("secretKeyRef") {
                let n = meta::str_at(r, "/name");
                lookup_key(
                    secret(ctx.cluster, ns, n),
                    "secret",
                    n,
                    meta::str_at(r, "/key"),
                    r.get("optional") == Some(&Value::Bool(true)),
                )?
                .map(EnvValue::Literal)
            } else if let Some(r) = vf.get("configMapKeyRef") {
                let n = meta::str_at(r, "/name");
                lookup_key(
                    config_map(ctx.cluster, ns, n),
                    "configmap",
                    n,
                    meta::str_at(r, "/key"),
                    r.get("optional") == Some(&Value::Bool(true)),
                )?
                .map(EnvValue::Literal)
            } else {
                None
            }
        } else {
            Some(EnvValue::Literal(meta::str_at(e, "/value").to_string()))
        };
        if let Some(value) = value {
            out.retain(|x| x.name != name);
            out.push(EnvVar { name, value });
        }
    }
    Ok(out)
}

fn probe_port(v: Option<&Value>) -> ProbePort {
    match v {
        Some(Value::String(s)) => match s.parse() {
            Ok(n) => ProbePort::Number(n),
            Err(_) => ProbePort::Name(s.clone()),
        },
        Some(n) => ProbePort::Number(n.as_u64().unwrap_or(0) as u16),
        None => ProbePort::Number(0),
    }
}

fn probe(v: Option<&Value>) -> Option<Probe> {
    let v = v?;
    let handler = if let Some(e) = v.get("exec") {
        ProbeHandler::Exec {
            command: strings(e, "/command"),
        }
    } else if let Some(t) = v.get("tcpSocket") {
        ProbeHandler::TcpSocket {
            port: probe_port(t.get("port")),
        }
    } else if let Some(h) = v.get("httpGet") {
        ProbeHandler::HttpGet {
            path: opt_str(h, "/path").unwrap_or_else(|| "/".into()),
            port: probe_port(h.get("port")),
            host: opt_str(h, "/host").and_then(|s| s.parse().ok()),
        }
    } else {
        return None;
    };
    Some(Probe {
        handler,
        initial_delay: secs(v, "/initialDelaySeconds", 0),
        period: secs(v, "/periodSeconds", 10),
        timeout: secs(v, "/timeoutSeconds", 1),
        success_threshold: v
            .get("successThreshold")
            .and_then(Value::as_u64)
            .unwrap_or(1) as u32,
        failure_threshold: v
            .get("failureThreshold")
            .and_then(Value::as_u64)
            .unwrap_or(3) as u32,
    })
}

fn container(ctx: &Context<'_>, pod: &Value, c: &Value, sa_mount: bool) -> Result<ContainerSpec> {
    let mut mounts: Vec<VolumeMount> = arr(c, "/volumeMounts")
        .into_iter()
        .map(|m| VolumeMount {
            name: meta::str_at(m, "/name").to_string(),
            mount_path: meta::str_at(m, "/mountPath").to_string(),
            read_only: m.get("readOnly") == Some(&Value::Bool(true)),
            sub_path: opt_str(m, "/subPath"),
        })
        .collect();
    if sa_mount && !mounts.iter().any(|m| m.mount_path == SA_MOUNT_PATH) {
        mounts.push(VolumeMount {
            name: SA_VOLUME.into(),
            mount_path: SA_MOUNT_PATH.into(),
            read_only: true,
            sub_path: None,
        });
    }
    Ok(ContainerSpec {
        name: meta::str_at(c, "/name").to_string(),
        image: meta::str_at(c, "/image").to_string(),
        command: strings(c, "/command"),
        args: strings(c, "/args"),
        env: env(ctx, pod, c)?,
        working_dir: opt_str(c, "/workingDir"),
        volume_mounts: mounts,
        ports: arr(c, "/ports")
            .into_iter()
            .map(|p| ContainerPort {
                name: opt_str(p, "/name"),
                container_port: p.get("containerPort").and_then(Value::as_u64).unwrap_or(0) as u16,
                protocol: opt_str(p, "/protocol").unwrap_or_else(|| "TCP".into()),
            })
            .collect(),
        readiness_probe: probe(c.get("readinessProbe")),
        liveness_probe: probe(c.get("livenessProbe")),
        startup_probe: probe(c.get("startupProbe")),
        stdin: c.get("stdin").and_then(Value::as_bool).unwrap_or(false),
        stdin_once: c.get("stdinOnce").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn mode(v: &Value, default: u32) -> u32 {
    v.get("mode")
        .and_then(Value::as_u64)
        .map(|m| m as u32)
        .unwrap_or(default)
}

/// Files of a configMap/secret source: `items` select and rename keys, else every key.
fn key_files(
    data: Option<Vec<(String, Vec<u8>)>>,
    src: &Value,
    kind: &str,
    name: &str,
    default_mode: u32,
) -> Result<Vec<VolumeFile>> {
    let optional = src.get("optional") == Some(&Value::Bool(true));
    let Some(data) = data else {
        if optional {
            return Ok(Vec::new());
        }
        return Err(Error::Config(format!("{kind} \"{name}\" not found")));
    };
    let items = arr(src, "/items");
    if items.is_empty() {
        return Ok(data
            .into_iter()
            .map(|(k, v)| VolumeFile {
                path: k,
                contents: v,
                mode: default_mode,
            })
            .collect());
    }
    let mut out = Vec::new();
    for it in items {
        let key = meta::str_at(it, "/key");
        match data.iter().find(|(k, _)| k == key) {
            Some((_, v)) => out.push(VolumeFile {
                path: meta::str_at(it, "/path").to_string(),
                contents: v.clone(),
                mode: mode(it, default_mode),
            }),
            None if optional => {}
            None => {
                return Err(Error::Config(format!(
                    "couldn't find key {key} in {kind} {name}"
                )))
            }
        }
    }
    Ok(out)
}

fn downward_files(pod: &Value, src: &Value, default_mode: u32) -> Result<Vec<VolumeFile>> {
    let mut out = Vec::new();
    for it in arr(src, "/items") {
        let text = if let Some(f) = it.get("fieldRef") {
            match field_value(pod, meta::str_at(f, "/fieldPath"))? {
                Some(EnvValue::Literal(s)) => s,
                _ => {
                    return Err(Error::Config(format!(
                        "downwardAPI volume: fieldPath {} is not supported in volumes",
                        meta::str_at(f, "/fieldPath")
                    )))
                }
            }
        } else if let Some(r) = it.get("resourceFieldRef") {
            let cname = meta::str_at(r, "/containerName");
            let c = arr(pod, "/spec/containers")
                .into_iter()
                .find(|c| meta::str_at(c, "/name") == cname);
            resource_value(c, meta::str_at(r, "/resource"))
        } else {
            continue;
        };
        out.push(VolumeFile {
            path: meta::str_at(it, "/path").to_string(),
            contents: text.into_bytes(),
            mode: mode(it, default_mode),
        });
    }
    Ok(out)
}

/// A TokenRequest-style token bound to the pod, minted by the API server's signer.
fn sa_token(
    ctx: &Context<'_>,
    pod: &Value,
    audience: Option<&str>,
    seconds: i64,
) -> Result<Vec<u8>> {
    let ns = meta::namespace(pod);
    let sa_name = opt_str(pod, "/spec/serviceAccountName").unwrap_or_else(|| "default".into());
    let sa_uid = ctx
        .cluster
        .store
        .get("/serviceaccounts", ns, &sa_name)
        .map(|s| meta::uid_of(&s).to_string())
        .ok_or_else(|| Error::Config(format!("serviceaccount \"{sa_name}\" not found")))?;
    let audiences = match audience {
        Some(a) if !a.is_empty() => vec![a.to_string()],
        _ => ctx.cluster.auth.api_audiences.clone(),
    };
    let (token, _) = ctx
        .cluster
        .auth
        .issue(
            ns,
            &sa_name,
            &sa_uid,
            &audiences,
            seconds.max(600),
            Some(("Pod", meta::name(pod), meta::uid_of(pod))),
        )
        .map_err(|e| Error::Api(format!("sign the service account token: {e}")))?;
    Ok(token.into_bytes())
}

fn volume(ctx: &Context<'_>, pod: &Value, v: &Value) -> Result<Option<VolumeSource>> {
    let ns = meta::namespace(pod);
    let default_mode = |src: &Value| {
        src.get("defaultMode")
            .and_then(Value::as_u64)
            .map(|m| m as u32)
            .unwrap_or(0o644)
    };
    if v.get("emptyDir").is_some() {
        return Ok(Some(VolumeSource::EmptyDir));
    }
    if let Some(p) = v.get("persistentVolumeClaim") {
        let claim_name = meta::str_at(p, "/claimName").to_string();
        // As the kubelet: a pod does not start on a claim that does not exist (or is being
        // deleted); the volume is the claim's, by uid.
        let claim = ctx
            .cluster
            .store
            .get("/persistentvolumeclaims", ns, &claim_name)
            .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
            .ok_or_else(|| {
                Error::Config(format!("persistentvolumeclaim \"{claim_name}\" not found"))
            })?;
        return Ok(Some(VolumeSource::PersistentVolumeClaim {
            claim_uid: meta::uid_of(&claim).to_string(),
            claim_name,
        }));
    }
    if let Some(h) = v.get("hostPath") {
        let type_name = meta::str_at(h, "/type");
        let kind = HostPathType::parse(type_name).ok_or_else(|| {
            Error::Config(format!(
                "hostPath volume {:?}: unknown type {type_name:?}",
                meta::str_at(v, "/name")
            ))
        })?;
        return Ok(Some(VolumeSource::HostPath {
            path: meta::str_at(h, "/path").into(),
            kind,
        }));
    }
    if let Some(s) = v.get("configMap") {
        let n = meta::str_at(s, "/name");
        return Ok(Some(VolumeSource::Files(key_files(
            config_map(ctx.cluster, ns, n),
            s,
            "configmap",
            n,
            default_mode(s),
        )?)));
    }
    if let Some(s) = v.get("secret") {
        let n = meta::str_at(s, "/secretName");
        return Ok(Some(VolumeSource::Files(key_files(
            secret(ctx.cluster, ns, n),
            s,
            "secret",
            n,
            default_mode(s),
        )?)));
    }
    if let Some(s) = v.get("downwardAPI") {
        return Ok(Some(VolumeSource::Files(downward_files(
            pod,
            s,
            default_mode(s),
        )?)));
    }
    if let Some(p) = v.get("projected") {
        let dm = default_mode(p);
        let mut files = Vec::new();
        for src in arr(p, "/sources") {
            if let Some(t) = src.get("serviceAccountToken") {
                files.push(VolumeFile {
                    path: meta::str_at(t, "/path").to_string(),
                    contents: sa_token(
                        ctx,
                        pod,
                        t.get("audience").and_then(Value::as_str),
                        t.get("expirationSeconds")
                            .and_then(Value::as_i64)
                            .unwrap_or(SA_TOKEN_SECONDS),
                    )?,
                    mode: dm,
                });
            } else if let Some(s) = src.get("configMap") {
                let n = meta::str_at(s, "/name");
                files.extend(key_files(
                    config_map(ctx.cluster, ns, n),
                    s,
                    "configmap",
                    n,
                    dm,
                )?);
            } else if let Some(s) = src.get("secret") {
                let n = meta::str_at(s, "/name");
                files.extend(key_files(secret(ctx.cluster, ns, n), s, "secret", n, dm)?);
            } else if let Some(s) = src.get("downwardAPI") {
                files.extend(downward_files(pod, s, dm)?);
            }
        }
        return Ok(Some(VolumeSource::Files(files)));
    }
    Ok(None)
}

/// The default service-account volume: token, ca.crt and namespace.
fn sa_volume(ctx: &Context<'_>, pod: &Value) -> Result<VolumeSpec> {
    Ok(VolumeSpec {
        name: SA_VOLUME.into(),
        source: VolumeSource::Files(vec![
            VolumeFile {
                path: "token".into(),
                contents: sa_token(ctx, pod, None, SA_TOKEN_SECONDS)?,
                mode: 0o644,
            },
            VolumeFile {
                path: "ca.crt".into(),
                contents: ctx.cluster.ca_pem.as_bytes().to_vec(),
                mode: 0o644,
            },
            VolumeFile {
                path: "namespace".into(),
                contents: meta::namespace(pod).as_bytes().to_vec(),
                mode: 0o644,
            },
        ]),
    })
}

/// Whether the pod gets the default service-account volume.
fn automount(ctx: &Context<'_>, pod: &Value) -> bool {
    if let Some(b) = pod
        .pointer("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
    {
        return b;
    }
    let sa_name = opt_str(pod, "/spec/serviceAccountName").unwrap_or_else(|| "default".into());
    ctx.cluster
        .store
        .get("/serviceaccounts", meta::namespace(pod), &sa_name)
        .and_then(|s| {
            s.get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// The rendered volumes of a pod (with the injected service-account volume).
pub fn volumes(ctx: &Context<'_>, pod: &Value) -> Result<Vec<VolumeSpec>> {
    rendered_volumes(ctx, pod, true)
}

/// The volumes of a running pod whose files are refreshed (every volume but its claims: a
/// claim deleted while the pod runs stays mounted and does not stop the refresh).
pub fn refreshed_volumes(ctx: &Context<'_>, pod: &Value) -> Result<Vec<VolumeSpec>> {
    rendered_volumes(ctx, pod, false)
}

fn rendered_volumes(ctx: &Context<'_>, pod: &Value, claims: bool) -> Result<Vec<VolumeSpec>> {
    let mut out = Vec::new();
    for v in arr(pod, "/spec/volumes") {
        if !claims && v.get("persistentVolumeClaim").is_some() {
            continue;
        }
        if let Some(source) = volume(ctx, pod, v)? {
            out.push(VolumeSpec {
                name: meta::str_at(v, "/name").to_string(),
                source,
            });
        }
    }
    if automount(ctx, pod) && !out.iter().any(|v| v.name == SA_VOLUME) {
        out.push(sa_volume(ctx, pod)?);
    }
    Ok(out)
}

/// Translates a bound Pod into the runtime's input.
pub fn pod_spec(ctx: &Context<'_>, pod: &Value) -> Result<PodSpec> {
    let sa = automount(ctx, pod);
    let containers = |p: &str| -> Result<Vec<ContainerSpec>> {
        arr(pod, p)
            .into_iter()
            .map(|c| container(ctx, pod, c, sa))
            .collect()
    };
    let restart_policy = match meta::str_at(pod, "/spec/restartPolicy") {
        "Never" => RestartPolicy::Never,
        "OnFailure" => RestartPolicy::OnFailure,
        _ => RestartPolicy::Always,
    };
    Ok(PodSpec {
        namespace: meta::namespace(pod).to_string(),
        name: meta::name(pod).to_string(),
        uid: meta::uid_of(pod).to_string(),
        node_name: meta::str_at(pod, "/spec/nodeName").to_string(),
        hostname: opt_str(pod, "/spec/hostname").unwrap_or_else(|| meta::name(pod).to_string()),
        subdomain: opt_str(pod, "/spec/subdomain"),
        restart_policy,
        termination_grace_period: grace(pod),
        init_containers: containers("/spec/initContainers")?,
        containers: containers("/spec/containers")?,
        volumes: volumes(ctx, pod)?,
        host_network: pod.pointer("/spec/hostNetwork").and_then(Value::as_bool) == Some(true),
        fs_group: pod
            .pointer("/spec/securityContext/fsGroup")
            .and_then(Value::as_u64)
            .and_then(|gid| u32::try_from(gid).ok()),
    })
}

/// `spec.terminationGracePeriodSeconds` (30 s by default), or the deletion's own grace
/// (`metadata.deletionGracePeriodSeconds`) when the pod is being deleted.
pub fn grace(pod: &Value) -> Duration {
    let deletion = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_u64);
    let spec = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_u64);
    Duration::from_secs(deletion.or(spec).unwrap_or(30))
}
