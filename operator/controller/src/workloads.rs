//! The per-site workloads (docs/design/architecture.md#names): per site a StatefulSet
//! `mysql-<group>-<site>` (one pod `-0`) governed by the headless Service
//! `mysql-<group>-<site>-hl`, the group's credentials Secret `mysql-<group>-credentials`, and
//! the two Secrets of the sidecar API's request signatures
//! (docs/design/history.md#issue-10-case-8): `mysql-<group>-operator-key` (the operator's
//! Ed25519 signing seed; no pod mounts it, so no kubelet ever fetches it) and
//! `mysql-<group>-sidecar-keys` (the verifying half and the group's peer key, mounted into
//! every sidecar).
//!
//! A shell concern, done in the act phase before each poll's gather ("ensure workloads"):
//! `decide` never sees it (core stays pure). The Services themselves, the `-hl` one included,
//! are core's `ApplyService` actions.
//!
//! Policy:
//! - The StatefulSet is applied every poll by server-side apply (field manager `bloodraven`,
//!   force). SSA is idempotent: an unchanged body changes nothing (no new resourceVersion, no
//!   rollout), so no diff is computed here.
//! - A running site's pod spec is never changed except through the ordered update
//!   (docs/design/operator.md#ordered-update-and-restore-in-place, `bloodraven_core::engine`
//!   `update`): the StatefulSet uses `updateStrategy: OnDelete` (a template change never
//!   replaces a running pod), and when `spec.image` differs from the live StatefulSet's `mysql`
//!   image this ensure keeps the live image. Core's `RollSite` moves one site at a time:
//!   [`set_site_image`] applies the template with the new image, then the act phase deletes the
//!   pod (uid precondition, graceful) and the StatefulSet recreates it from the new template.
//! - Each site has a second volume claim, [`BACKUP_VOLUME`], mounted into the sidecar only: the
//!   named backups it takes and restores from (docs/design/history.md#issue-12-part-2). The
//!   sidecar also mounts the data volume, writable: `mariadb-backup` reads it for the physical
//!   copy, and a restore from that copy replaces its contents while mysqld is down. For that
//!   restore the `mysql` container starts mysqld through the restore gate
//!   ([`bloodraven_api::sidecar::MYSQLD_GATE_SCRIPT`], then the image's `docker-entrypoint.sh`,
//!   the official `mariadb` and `mysql` images' entrypoint): while the sidecar's restore
//!   journal sits in the data directory the gate holds mysqld down and touches
//!   [`MYSQLD_GATE_MARK`]; otherwise it `exec`s the entrypoint, so mysqld is the container's
//!   process as before. The sidecar gets `--mysqld-gate-mark` only in the same template, so a
//!   pod made before the gate existed is refused a physical restore. The pod's `fsGroup` is
//!   mysqld's gid, so a volume the kubelet prepares is group-writable by the sidecar's user (it
//!   runs as [`MYSQL_IMAGE_UID`]). `volumeClaimTemplates` cannot change on a live StatefulSet
//!   (the API server refuses it), so a StatefulSet made before the backup volume existed keeps
//!   its shape: no backup volume, and its sidecar runs without `--backup-dir` (the backup and
//!   restore jobs answer 409 there, saying so) until it is recreated.
//! - The Secret is created only when missing (never rewritten), with random passwords
//!   generated here and never logged. It has no owner reference: like the volumes it outlives
//!   the group, so a recreated group still opens its old data.
//! - The key Secrets likewise: created when missing, random, never logged, no owner. The one
//!   rewrite: when `mysql-<group>-sidecar-keys` names another verifying key than the signing
//!   seed's (the seed's Secret was deleted and made again), its verifying key is replaced so
//!   restarted sidecars trust the operator again; running ones read their keys at start and
//!   refuse the operator until restarted (logged as an error).

use std::collections::BTreeMap;

use bloodraven_api::auth::{to_hex, OperatorKey, OperatorVerifyingKey, KEY_BYTES};
use bloodraven_api::{names, Flavor, MysqlFailoverGroup, MysqlFailoverGroupSpec};
use bloodraven_core::engine::{
    SIDECAR_READINESS_FAILURES, SIDECAR_READINESS_PERIOD, SIDECAR_READINESS_TIMEOUT,
};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSecurityContext, PodSpec, PodTemplateSpec,
    Probe, Secret, SecretKeySelector, SecretVolumeSource, SecurityContext, Toleration, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PostParams};
use kube::{Api, Client};

use crate::act::apply_params;
use crate::error::{Error, Result};
use crate::render::{apply_body, owner_reference, LABEL_MANAGED_BY, MANAGED_BY};
use crate::sidecar::SigningKeys;

/// Name of the MySQL container.
pub const CONTAINER_MYSQL: &str = "mysql";
/// Name of the sidecar container.
pub const CONTAINER_SIDECAR: &str = "sidecar";
/// Repository of the sidecar image; the tag is the operator's version.
pub const SIDECAR_IMAGE_REPOSITORY: &str = "bloodraven/sidecar";
/// Name of the volume claim template (and of the volume) holding the data directory.
pub const DATA_VOLUME: &str = "data";
/// Where the data volume is mounted in the `mysql` container.
pub const DATA_MOUNT_PATH: &str = "/var/lib/mysql";
/// Name of the emptyDir both containers mount at [`RUN_MOUNT_PATH`]: mysqld's pid file, which
/// the sidecar's watchdog reads to SIGKILL a mysqld it cannot fence (the pod shares its
/// process namespace).
pub const RUN_VOLUME: &str = "run";
/// Where [`RUN_VOLUME`] is mounted in both containers.
pub const RUN_MOUNT_PATH: &str = "/run/bloodraven";
/// The uid (and gid) mysqld runs as in the official `mariadb` and `mysql` images. The sidecar
/// runs as the same user so its watchdog may signal mysqld (a non-root user cannot signal
/// another user's process, and an added `KILL` capability is not effective for a non-root
/// container user).
pub const MYSQL_IMAGE_UID: i64 = 999;
/// mysqld's pid file, on [`RUN_VOLUME`].
pub const MYSQLD_PID_FILE: &str = "/run/bloodraven/mysqld.pid";
/// The mark mysqld's restore gate touches while it holds mysqld down, on [`RUN_VOLUME`] (the
/// sidecar's `--mysqld-gate-mark`).
pub const MYSQLD_GATE_MARK: &str = "/run/bloodraven/mysqld-gate-held";
/// The entrypoint of the official `mariadb` and `mysql` images, which the restore gate
/// `exec`s (a container `command` replaces the image's ENTRYPOINT).
pub const IMAGE_ENTRYPOINT: &str = "docker-entrypoint.sh";
/// Size requested by each site's data volume claim.
pub const DATA_STORAGE: &str = "1Gi";
/// Name of the volume claim template (and of the volume) holding the site's named backups.
pub const BACKUP_VOLUME: &str = "backups";
/// Where [`BACKUP_VOLUME`] is mounted in the sidecar (its `--backup-dir`).
pub const BACKUP_MOUNT_PATH: &str = "/var/lib/bloodraven/backups";
/// Size requested by each site's backup volume claim.
pub const BACKUP_STORAGE: &str = "2Gi";
/// `GET /healthz` on the sidecar's named port: its readiness and its liveness probe.
fn sidecar_healthz() -> HTTPGetAction {
    HTTPGetAction {
        path: Some(bloodraven_api::sidecar::PATH_HEALTHZ.to_string()),
        port: IntOrString::String(names::PORT_NAME_SIDECAR.to_string()),
        ..HTTPGetAction::default()
    }
}

/// Whole seconds of a probe field.
fn seconds(duration: std::time::Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

/// The sidecar's liveness probe period: three failures in a row (30 s) restart it.
const SIDECAR_LIVENESS_PERIOD_SECONDS: i32 = 10;
/// How long one liveness probe waits for `/healthz` (a frozen sidecar never answers).
const SIDECAR_LIVENESS_TIMEOUT_SECONDS: i32 = 5;

/// Key of the MySQL root password in the credentials Secret.
pub const SECRET_KEY_ROOT_PASSWORD: &str = "root-password";
/// Key of the replication user's password in the credentials Secret.
pub const SECRET_KEY_REPLICATION_PASSWORD: &str = "replication-password";
/// The replication user (the sidecar's `--replication-user` default).
pub const REPLICATION_USER: &str = "replication";
/// Random bytes in each generated password (hex encoded: twice as many characters).
pub const PASSWORD_BYTES: usize = 24;
/// Key of the operator's Ed25519 signing seed (hex) in [`operator_key_secret`].
pub const SECRET_KEY_SIGNING_KEY: &str = "signing-key";
/// Key of the operator's verifying key (hex) in [`sidecar_keys_secret`].
pub const SECRET_KEY_OPERATOR_VERIFYING_KEY: &str = "operator-verifying-key";
/// Key of the group's peer key (hex) in [`sidecar_keys_secret`].
pub const SECRET_KEY_PEER_KEY: &str = "peer-key";
/// Name of the volume of [`sidecar_keys_secret`] in the pod.
pub const KEYS_VOLUME: &str = "sidecar-keys";
/// Where [`KEYS_VOLUME`] is mounted in the sidecar container (only there).
pub const KEYS_MOUNT_PATH: &str = "/etc/bloodraven/sidecar-keys";

/// `mysql-<group>-operator-key`: the operator's signing seed for the group's sidecars. No pod
/// mounts it.
pub fn operator_key_secret(group: &str) -> String {
    format!("mysql-{group}-operator-key")
}

/// `mysql-<group>-sidecar-keys`: what every sidecar of the group mounts: the operator's
/// verifying key and the group's peer key.
pub fn sidecar_keys_secret(group: &str) -> String {
    format!("mysql-{group}-sidecar-keys")
}

/// `mysql-<group>-credentials`: the Secret holding the root and replication passwords.
pub fn credentials_secret(group: &str) -> String {
    format!("mysql-{group}-credentials")
}

/// `bloodraven/sidecar:<operator version>`.
pub fn sidecar_image() -> String {
    format!("{SIDECAR_IMAGE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// The site's `server_id`: its 1-based position in `spec.sites` (unique per site; a running
/// site keeps the one its pod started with, since a running pod spec is never changed).
pub fn server_id(spec: &MysqlFailoverGroupSpec, site: &str) -> Option<usize> {
    spec.sites
        .iter()
        .position(|candidate| candidate.name == site)
        .map(|index| index + 1)
}

/// The pod labels (and StatefulSet selector) of a site.
pub fn site_labels(group: &str, site: &str) -> BTreeMap<String, String> {
    [
        (names::LABEL_INSTANCE.to_string(), group.to_string()),
        (names::LABEL_SITE.to_string(), site.to_string()),
    ]
    .into_iter()
    .collect()
}

/// mysqld's arguments for GTID replication (operator/mysql/README.md "What the deployment
/// must configure"): binlog with replicated transactions, strict GTIDs, a unique server_id,
/// read-only at start (the sidecar unfences), `report_host` = the site's internal Service,
/// and the event scheduler on: it runs the write deadline, the dead man's switch that fences
/// mysqld when its sidecar dies or hangs (`bloodraven_mysql::deadline`).
pub fn mysqld_args(flavor: Flavor, server_id: usize, report_host: &str) -> Vec<String> {
    let mut args = vec![
        "--log-bin=mysql-bin".to_string(),
        format!("--server-id={server_id}"),
        "--read-only=ON".to_string(),
        format!("--report-host={report_host}"),
        format!("--pid-file={MYSQLD_PID_FILE}"),
        "--event-scheduler=ON".to_string(),
    ];
    match flavor {
        Flavor::Mariadb => args.extend([
            "--log-slave-updates=ON".to_string(),
            "--gtid-strict-mode=ON".to_string(),
        ]),
        Flavor::Mysql => args.extend([
            "--log-replica-updates=ON".to_string(),
            "--gtid-mode=ON".to_string(),
            "--enforce-gtid-consistency=ON".to_string(),
            "--super-read-only=ON".to_string(),
        ]),
    }
    args
}

/// The sidecar's flags (operator/sidecar `Config`): group, site, every site, the write lease,
/// the flavor, peer discovery by the SRV records of each site's internal Service
/// (`{site}` is substituted by the sidecar), and the request-signature keys mounted from
/// [`sidecar_keys_secret`] (never `--insecure-allow-unauthenticated`).
///
/// With `backups` (the pod has [`BACKUP_VOLUME`]), also `--backup-dir`, `--mysql-datadir`
/// (the data volume, mounted into the sidecar) and `--mysqld-gate-mark` (the `mysql`
/// container starts mysqld through the restore gate).
pub fn sidecar_args(
    spec: &MysqlFailoverGroupSpec,
    group: &str,
    site: &str,
    namespace: &str,
    backups: bool,
) -> Vec<String> {
    let sites: Vec<&str> = spec.sites.iter().map(|site| site.name.as_str()).collect();
    let flavor = match spec.flavor {
        Flavor::Mariadb => "mariadb",
        Flavor::Mysql => "mysql",
    };
    let mut args = vec![
        format!("--group={group}"),
        format!("--site={site}"),
        format!("--sites={}", sites.join(",")),
        format!(
            "--lease-duration-ms={}",
            spec.effective_write_lease().as_millis()
        ),
        format!("--mysql-flavor={flavor}"),
        format!(
            "--peer-srv=_{}._tcp.mysql-{group}-{{site}}.{namespace}.svc.cluster.local",
            names::PORT_NAME_SIDECAR
        ),
        format!("--mysqld-pid-file={MYSQLD_PID_FILE}"),
        format!("--operator-key-file={KEYS_MOUNT_PATH}/{SECRET_KEY_OPERATOR_VERIFYING_KEY}"),
        format!("--peer-key-file={KEYS_MOUNT_PATH}/{SECRET_KEY_PEER_KEY}"),
    ];
    if backups {
        args.extend([
            format!("--backup-dir={BACKUP_MOUNT_PATH}"),
            format!("--mysql-datadir={DATA_MOUNT_PATH}"),
            format!("--mysqld-gate-mark={MYSQLD_GATE_MARK}"),
        ]);
    }
    args
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn mysql_env(flavor: Flavor, secret: &str) -> Vec<EnvVar> {
    match flavor {
        Flavor::Mariadb => vec![
            secret_env("MARIADB_ROOT_PASSWORD", secret, SECRET_KEY_ROOT_PASSWORD),
            EnvVar {
                name: "MARIADB_REPLICATION_USER".to_string(),
                value: Some(REPLICATION_USER.to_string()),
                ..EnvVar::default()
            },
            secret_env(
                "MARIADB_REPLICATION_PASSWORD",
                secret,
                SECRET_KEY_REPLICATION_PASSWORD,
            ),
        ],
        Flavor::Mysql => vec![secret_env(
            "MYSQL_ROOT_PASSWORD",
            secret,
            SECRET_KEY_ROOT_PASSWORD,
        )],
    }
}

/// The StatefulSet of `site` (`None` when the site is not in the spec). `mysql_image` is the
/// image to run: `spec.image` for a new StatefulSet, the live one for an existing one.
/// `backups`: with the backup volume claim (a new StatefulSet, or a live one that has it;
/// module docs).
pub fn statefulset(
    spec: &MysqlFailoverGroupSpec,
    group: &str,
    namespace: &str,
    site: &str,
    mysql_image: &str,
    backups: bool,
    owner: Option<OwnerReference>,
) -> Option<StatefulSet> {
    let site_spec = spec.site(site)?;
    let server_id = server_id(spec, site)?;
    let labels = site_labels(group, site);
    let mut object_labels = labels.clone();
    object_labels.insert(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string());
    let secret = credentials_secret(group);
    let report_host = names::source_host(group, site, namespace);
    let mysql = Container {
        name: CONTAINER_MYSQL.to_string(),
        image: Some(mysql_image.to_string()),
        command: backups.then(mysqld_gate_command),
        args: Some(mysqld_args(spec.flavor, server_id, &report_host)),
        env: Some(mysql_env(spec.flavor, &secret)),
        ports: Some(vec![ContainerPort {
            name: Some(names::PORT_NAME_MYSQL.to_string()),
            container_port: i32::from(names::PORT_MYSQL),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        volume_mounts: Some(vec![
            VolumeMount {
                name: DATA_VOLUME.to_string(),
                mount_path: DATA_MOUNT_PATH.to_string(),
                ..VolumeMount::default()
            },
            run_mount(),
        ]),
        ..Container::default()
    };
    let sidecar = Container {
        name: CONTAINER_SIDECAR.to_string(),
        image: Some(sidecar_image()),
        args: Some(sidecar_args(spec, group, site, namespace, backups)),
        env: Some(vec![
            secret_env(
                "BLOODRAVEN_MYSQL_PASSWORD",
                &secret,
                SECRET_KEY_ROOT_PASSWORD,
            ),
            secret_env(
                "BLOODRAVEN_REPLICATION_PASSWORD",
                &secret,
                SECRET_KEY_REPLICATION_PASSWORD,
            ),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some(names::PORT_NAME_SIDECAR.to_string()),
            container_port: i32::from(names::PORT_SIDECAR),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        // Core's agentless rule waits out this probe's window before it takes "ready" as
        // proof of a live sidecar: the numbers are core's (SIDECAR_NOT_READY_WITHIN).
        readiness_probe: Some(Probe {
            http_get: Some(sidecar_healthz()),
            period_seconds: Some(seconds(SIDECAR_READINESS_PERIOD)),
            timeout_seconds: Some(seconds(SIDECAR_READINESS_TIMEOUT)),
            failure_threshold: Some(i32::try_from(SIDECAR_READINESS_FAILURES).unwrap_or(i32::MAX)),
            ..Probe::default()
        }),
        // A hung sidecar (its /healthz times out, or reports the enforcer stalled) is
        // restarted. Safety does not wait for it: mysqld's write deadline fences mysqld within
        // the lease whatever became of its sidecar (operator/controller/README.md "Fencing").
        liveness_probe: Some(Probe {
            http_get: Some(sidecar_healthz()),
            period_seconds: Some(SIDECAR_LIVENESS_PERIOD_SECONDS),
            timeout_seconds: Some(SIDECAR_LIVENESS_TIMEOUT_SECONDS),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        volume_mounts: Some(sidecar_mounts(backups)),
        security_context: Some(SecurityContext {
            run_as_user: Some(MYSQL_IMAGE_UID),
            run_as_group: Some(MYSQL_IMAGE_UID),
            run_as_non_root: Some(true),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let mut claims = vec![claim(DATA_VOLUME, DATA_STORAGE)];
    if backups {
        claims.push(claim(BACKUP_VOLUME, BACKUP_STORAGE));
    }
    Some(StatefulSet {
        metadata: ObjectMeta {
            name: Some(names::statefulset(group, site)),
            namespace: Some(namespace.to_string()),
            labels: Some(object_labels),
            owner_references: owner.map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(StatefulSetSpec {
            service_name: Some(names::headless_service(group, site)),
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_string()),
                ..StatefulSetUpdateStrategy::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    node_selector: (!site_spec.node_selector.is_empty())
                        .then(|| site_spec.node_selector.clone()),
                    tolerations: Some(vec![demoted_toleration()]),
                    containers: vec![mysql, sidecar],
                    // The sidecar's watchdog signals mysqld (operator docs, "Fencing").
                    share_process_namespace: Some(true),
                    // The volumes the kubelet prepares are group-owned by mysqld's gid, so the
                    // sidecar (that uid and gid) may write its backups on them.
                    security_context: Some(PodSecurityContext {
                        fs_group: Some(MYSQL_IMAGE_UID),
                        ..PodSecurityContext::default()
                    }),
                    volumes: Some(vec![
                        Volume {
                            name: RUN_VOLUME.to_string(),
                            empty_dir: Some(EmptyDirVolumeSource::default()),
                            ..Volume::default()
                        },
                        Volume {
                            name: KEYS_VOLUME.to_string(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(sidecar_keys_secret(group)),
                                optional: Some(false),
                                ..SecretVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                    ]),
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: Some(claims),
            ..StatefulSetSpec::default()
        }),
        status: None,
    })
}

/// A `ReadWriteOnce` volume claim template named `name` requesting `storage`.
fn claim(name: &str, storage: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(
                    [("storage".to_string(), Quantity(storage.to_string()))]
                        .into_iter()
                        .collect(),
                ),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

/// The `mysql` container's command with backups: the restore gate, then the image's
/// entrypoint (module docs).
fn mysqld_gate_command() -> Vec<String> {
    bloodraven_api::sidecar::mysqld_gate_command(
        &format!(
            "{DATA_MOUNT_PATH}/{}",
            bloodraven_api::sidecar::RESTORE_JOURNAL
        ),
        MYSQLD_GATE_MARK,
        &[IMAGE_ENTRYPOINT],
    )
}

/// The sidecar's mounts: the run volume, its keys (read-only) and, with `backups`, the backup
/// volume and the data volume (writable: a physical restore replaces its contents).
fn sidecar_mounts(backups: bool) -> Vec<VolumeMount> {
    let mut mounts = vec![
        run_mount(),
        VolumeMount {
            name: KEYS_VOLUME.to_string(),
            mount_path: KEYS_MOUNT_PATH.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    ];
    if backups {
        mounts.extend([
            VolumeMount {
                name: BACKUP_VOLUME.to_string(),
                mount_path: BACKUP_MOUNT_PATH.to_string(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: DATA_VOLUME.to_string(),
                mount_path: DATA_MOUNT_PATH.to_string(),
                ..VolumeMount::default()
            },
        ]);
    }
    mounts
}

/// Whether the live StatefulSet has the backup volume claim template.
pub fn live_has_backups(live: &StatefulSet) -> bool {
    live.spec
        .as_ref()
        .and_then(|spec| spec.volume_claim_templates.as_ref())
        .is_some_and(|claims| {
            claims
                .iter()
                .any(|claim| claim.metadata.name.as_deref() == Some(BACKUP_VOLUME))
        })
}

fn run_mount() -> VolumeMount {
    VolumeMount {
        name: RUN_VOLUME.to_string(),
        mount_path: RUN_MOUNT_PATH.to_string(),
        ..VolumeMount::default()
    }
}

/// Tolerates every group's demotion taint (`operator: Exists`, whatever the group in its
/// value): the demoted site's own pod stays (fenced) on its node instead of being evicted, and
/// so does every other group's site pod on that node. The taint is for the applications that
/// follow the writable site; a site pod of another group sharing the node (one operator for a
/// fleet) is not one, and evicting it failed that group over too (`just bench-fleet 10`: one
/// failover in the playground took nine other groups' primaries).
pub fn demoted_toleration() -> Toleration {
    Toleration {
        key: Some(names::TAINT_DEMOTED.to_string()),
        operator: Some("Exists".to_string()),
        value: None,
        effect: Some(names::TAINT_EFFECT.to_string()),
        toleration_seconds: None,
    }
}

/// The image of the live StatefulSet's `mysql` container.
pub fn live_mysql_image(live: &StatefulSet) -> Option<&str> {
    live.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|container| container.name == CONTAINER_MYSQL)?
        .image
        .as_deref()
}

/// The credentials Secret with `root_password` and `replication_password`.
pub fn secret(
    group: &str,
    namespace: &str,
    root_password: String,
    replication_password: String,
) -> Secret {
    let mut labels = BTreeMap::new();
    labels.insert(names::LABEL_INSTANCE.to_string(), group.to_string());
    labels.insert(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string());
    Secret {
        metadata: ObjectMeta {
            name: Some(credentials_secret(group)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        string_data: Some(
            [
                (SECRET_KEY_ROOT_PASSWORD.to_string(), root_password),
                (
                    SECRET_KEY_REPLICATION_PASSWORD.to_string(),
                    replication_password,
                ),
            ]
            .into_iter()
            .collect(),
        ),
        type_: Some("Opaque".to_string()),
        ..Secret::default()
    }
}

fn group_secret(group: &str, namespace: &str, name: String, data: Vec<(&str, String)>) -> Secret {
    let mut labels = BTreeMap::new();
    labels.insert(names::LABEL_INSTANCE.to_string(), group.to_string());
    labels.insert(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string());
    Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        string_data: Some(
            data.into_iter()
                .map(|(key, value)| (key.to_string(), value))
                .collect(),
        ),
        type_: Some("Opaque".to_string()),
        ..Secret::default()
    }
}

/// [`operator_key_secret`] holding `seed` (hex).
pub fn operator_key_secret_object(group: &str, namespace: &str, seed: &[u8; KEY_BYTES]) -> Secret {
    group_secret(
        group,
        namespace,
        operator_key_secret(group),
        vec![(SECRET_KEY_SIGNING_KEY, to_hex(seed))],
    )
}

/// [`sidecar_keys_secret`] holding `verifying` and the peer key `peer` (hex).
pub fn sidecar_keys_secret_object(
    group: &str,
    namespace: &str,
    verifying: &OperatorVerifyingKey,
    peer: &[u8; KEY_BYTES],
) -> Secret {
    group_secret(
        group,
        namespace,
        sidecar_keys_secret(group),
        vec![
            (SECRET_KEY_OPERATOR_VERIFYING_KEY, verifying.to_hex()),
            (SECRET_KEY_PEER_KEY, to_hex(peer)),
        ],
    )
}

/// The text under `key` of a Secret as read back (`data`, or `stringData` of one not yet
/// stored).
fn secret_text(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|data| data.get(key))
                .cloned()
        })
}

/// A random password: [`PASSWORD_BYTES`] bytes from the OS-seeded thread RNG, hex.
pub fn random_password() -> String {
    let bytes: [u8; PASSWORD_BYTES] = rand::random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Ensures the group's workloads (see the module docs) and loads the group's signing key
/// into `keys`. Every failure is logged with `outcome="unknown"` and the remaining sites are
/// still handled; returns how many steps failed. The next poll re-reads and re-applies; a key
/// loaded before stays in use.
pub async fn ensure(client: &Client, group: &MysqlFailoverGroup, keys: &SigningKeys) -> usize {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let name = group.metadata.name.clone().unwrap_or_default();
    let mut failures = 0;
    if let Err(error) = ensure_secret(client, &name, &namespace).await {
        tracing::warn!(group = %name, action = "EnsureSecret", outcome = "unknown", %error, "failed to ensure the credentials secret; retried next poll");
        failures += 1;
    }
    match ensure_keys(client, &name, &namespace).await {
        Ok(key) => keys.set(&namespace, &name, key),
        Err(error) => {
            tracing::warn!(group = %name, action = "EnsureKeys", outcome = "unknown", %error, "failed to ensure the request-signature keys; retried next poll");
            failures += 1;
        }
    }
    for site in &group.spec.sites {
        if let Err(error) = ensure_statefulset(client, group, &site.name).await {
            tracing::warn!(group = %name, site = %site.name, action = "EnsureStatefulSet", outcome = "unknown", %error, "failed to ensure the site's statefulset; retried next poll");
            failures += 1;
        }
    }
    failures
}

async fn ensure_secret(client: &Client, group: &str, namespace: &str) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = credentials_secret(group);
    let exists = api
        .get_opt(&name)
        .await
        .map_err(|error| Error::kube(format!("read secret {namespace}/{name}"), error))?
        .is_some();
    if exists {
        return Ok(());
    }
    let secret = secret(group, namespace, random_password(), random_password());
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(group = %group, secret = %name, "credentials secret created");
            Ok(())
        }
        Err(error) => {
            let error = Error::kube(format!("create secret {namespace}/{name}"), error);
            // Created meanwhile (another writer): the one that exists is kept.
            if error.is_conflict() {
                Ok(())
            } else {
                Err(error)
            }
        }
    }
}

/// Creates a Secret unless it exists; returns the one stored (created now, by another writer
/// meanwhile, or before).
async fn create_or_read(api: &Api<Secret>, namespace: &str, secret: Secret) -> Result<Secret> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            tracing::info!(secret = %name, namespace = %namespace, "secret created");
            Ok(created)
        }
        Err(error) => {
            let error = Error::kube(format!("create secret {namespace}/{name}"), error);
            if !error.is_conflict() {
                return Err(error);
            }
            api.get(&name)
                .await
                .map_err(|error| Error::kube(format!("read secret {namespace}/{name}"), error))
        }
    }
}

/// The group's signing key, creating its Secret and the sidecars' Secret when missing, and
/// making the sidecars' verifying key match it (module docs).
async fn ensure_keys(client: &Client, group: &str, namespace: &str) -> Result<OperatorKey> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let signing_name = operator_key_secret(group);
    let signing =
        match api.get_opt(&signing_name).await.map_err(|error| {
            Error::kube(format!("read secret {namespace}/{signing_name}"), error)
        })? {
            Some(secret) => secret,
            None => {
                let seed: [u8; KEY_BYTES] = rand::random();
                create_or_read(
                    &api,
                    namespace,
                    operator_key_secret_object(group, namespace, &seed),
                )
                .await?
            }
        };
    let key = secret_text(&signing, SECRET_KEY_SIGNING_KEY)
        .ok_or_else(|| {
            Error::SigningKey(format!(
                "read secret {namespace}/{signing_name}: key {SECRET_KEY_SIGNING_KEY} is missing"
            ))
        })
        .and_then(|text| {
            OperatorKey::from_hex(&text).map_err(|error| {
                Error::SigningKey(format!("read secret {namespace}/{signing_name}: {error}"))
            })
        })?;
    let verifying = key.verifying_key();
    let keys_name = sidecar_keys_secret(group);
    let published = match api
        .get_opt(&keys_name)
        .await
        .map_err(|error| Error::kube(format!("read secret {namespace}/{keys_name}"), error))?
    {
        Some(secret) => secret,
        None => {
            let peer: [u8; KEY_BYTES] = rand::random();
            create_or_read(
                &api,
                namespace,
                sidecar_keys_secret_object(group, namespace, &verifying, &peer),
            )
            .await?
        }
    };
    let trusted = secret_text(&published, SECRET_KEY_OPERATOR_VERIFYING_KEY)
        .and_then(|text| OperatorVerifyingKey::from_hex(&text).ok());
    if trusted != Some(verifying) {
        tracing::error!(group = %group, namespace = %namespace, secret = %keys_name, trusted = ?trusted, verifying_key = %verifying.to_hex(), "the sidecars' verifying key is not the operator's: replacing it; running sidecars refuse the operator until they restart");
        let patch = serde_json::json!({"stringData": {SECRET_KEY_OPERATOR_VERIFYING_KEY: verifying.to_hex()}});
        api.patch(
            &keys_name,
            &kube::api::PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|error| Error::kube(format!("patch secret {namespace}/{keys_name}"), error))?;
    }
    Ok(key)
}

/// The site's StatefulSet as the API server has it, if it exists.
async fn live_statefulset(
    client: &Client,
    group: &MysqlFailoverGroup,
    site: &str,
) -> Result<Option<StatefulSet>> {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let name = group.metadata.name.clone().unwrap_or_default();
    let object = names::statefulset(&name, site);
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
    api.get_opt(&object)
        .await
        .map_err(|error| Error::kube(format!("read statefulset {namespace}/{object}"), error))
}

async fn ensure_statefulset(client: &Client, group: &MysqlFailoverGroup, site: &str) -> Result<()> {
    let live = live_statefulset(client, group, site).await?;
    let live_image = live.as_ref().and_then(live_mysql_image).map(str::to_string);
    // A changed spec.image is rolled by the ordered update (core), one site at a time.
    let image = live_image.unwrap_or_else(|| group.spec.image.clone());
    let backups = live.as_ref().is_none_or(live_has_backups);
    apply_site(client, group, site, &image, backups).await
}

/// Applies the site's StatefulSet with `image` for its `mysql` container: the ordered
/// update's template change (`RollSite`). The running pod is not replaced by it (`OnDelete`).
/// The live StatefulSet says whether it has the backup volume (module docs).
pub async fn set_site_image(
    client: &Client,
    group: &MysqlFailoverGroup,
    site: &str,
    image: &str,
) -> Result<()> {
    let live = live_statefulset(client, group, site).await?;
    let backups = live.as_ref().is_none_or(live_has_backups);
    apply_site(client, group, site, image, backups).await
}

async fn apply_site(
    client: &Client,
    group: &MysqlFailoverGroup,
    site: &str,
    image: &str,
    backups: bool,
) -> Result<()> {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let name = group.metadata.name.clone().unwrap_or_default();
    let object = names::statefulset(&name, site);
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
    let Some(desired) = statefulset(
        &group.spec,
        &name,
        &namespace,
        site,
        image,
        backups,
        owner_reference(group),
    ) else {
        return Ok(());
    };
    api.patch(
        &object,
        &apply_params(),
        &Patch::Apply(apply_body(&desired)),
    )
    .await
    .map(drop)
    .map_err(|error| Error::kube(format!("apply statefulset {namespace}/{object}"), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_yaml::from_str(
            "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write, nodeSelector: {topology.kubernetes.io/zone: iad}}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\nwriteLease: {duration: 6s}\n",
        )
        .expect("spec")
    }

    fn render(site: &str) -> StatefulSet {
        statefulset(
            &spec(),
            "playground",
            "bloodraven-playground",
            site,
            "mariadb:10.11",
            true,
            None,
        )
        .expect("site in spec")
    }

    fn container<'a>(set: &'a StatefulSet, name: &str) -> &'a Container {
        set.spec
            .as_ref()
            .and_then(|spec| spec.template.spec.as_ref())
            .and_then(|pod| pod.containers.iter().find(|c| c.name == name))
            .expect("container")
    }

    /// docs/design/architecture.md#names: StatefulSet mysql-<group>-<site> governed by
    /// mysql-<group>-<site>-hl, one replica, pods labelled instance + site.
    #[test]
    fn names_statefulset_governing_service_and_labels() {
        let set = render("iad");
        assert_eq!(set.metadata.name.as_deref(), Some("mysql-playground-iad"));
        assert_eq!(
            set.metadata.namespace.as_deref(),
            Some("bloodraven-playground")
        );
        let spec = set.spec.as_ref().expect("spec");
        assert_eq!(
            spec.service_name.as_deref(),
            Some("mysql-playground-iad-hl")
        );
        assert_eq!(spec.replicas, Some(1));
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .expect("labels");
        let expected: BTreeMap<String, String> = [
            ("app.kubernetes.io/instance", "playground"),
            ("shipstream.io/site", "iad"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(labels, expected);
        assert_eq!(spec.selector.match_labels.as_ref(), Some(&expected));
        assert_eq!(
            spec.update_strategy
                .as_ref()
                .and_then(|s| s.type_.as_deref()),
            Some("OnDelete"),
            "a template change never replaces a running pod"
        );
        let claims = spec.volume_claim_templates.as_ref().expect("claims");
        assert_eq!(claims[0].metadata.name.as_deref(), Some("data"));
        let mount = &container(&set, "mysql")
            .volume_mounts
            .as_ref()
            .expect("mounts")[0];
        assert_eq!(
            (mount.name.as_str(), mount.mount_path.as_str()),
            ("data", "/var/lib/mysql")
        );
    }

    /// Kubernetes' toleration rule (pure): same key, same effect (or none), and for `Equal`
    /// the same value.
    fn tolerates(toleration: &Toleration, taint: &k8s_openapi::api::core::v1::Taint) -> bool {
        toleration.key.as_deref() == Some(taint.key.as_str())
            && toleration
                .effect
                .as_deref()
                .is_none_or(|effect| effect == taint.effect)
            && match toleration.operator.as_deref() {
                Some("Exists") => true,
                _ => toleration.value == taint.value,
            }
    }

    /// One operator for a fleet whose groups share nodes: group A's demotion taint on a node
    /// must not evict group B's site pod there (`just bench-fleet 10` caught nine groups failed
    /// over by the playground's one failover).
    #[test]
    fn a_site_pod_tolerates_every_group_s_demotion_taint() {
        let pod = render("iad")
            .spec
            .and_then(|spec| spec.template.spec)
            .expect("pod");
        let tolerations = pod.tolerations.unwrap_or_default();
        for group in ["playground", "fleet-01", "another"] {
            let taint = crate::render::demotion_taint(group);
            assert!(
                tolerations
                    .iter()
                    .any(|toleration| tolerates(toleration, &taint)),
                "{group}'s taint evicts the playground's site pod: {tolerations:?}"
            );
        }
    }

    /// docs/design/operator.md#surfaces-moved-on-promotion: the demotion taint
    /// (demoted=<group>:NoExecute) must not evict the demoted site's own pod, nor any other
    /// group's site pod on that node (`Exists`: a taint naming another group is tolerated
    /// too); the site's nodeSelector is the pod's.
    #[test]
    fn tolerates_the_demotion_taint_and_keeps_the_node_selector() {
        let set = render("iad");
        let pod = set
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.clone())
            .expect("pod");
        assert_eq!(
            pod.tolerations,
            Some(vec![Toleration {
                key: Some("bloodraven.shipstream.io/demoted".into()),
                operator: Some("Exists".into()),
                value: None,
                effect: Some("NoExecute".into()),
                toleration_seconds: None,
            }])
        );
        assert_eq!(
            pod.node_selector
                .as_ref()
                .and_then(|s| s.get("topology.kubernetes.io/zone"))
                .map(String::as_str),
            Some("iad")
        );
        let pdx = render("pdx");
        let pdx_pod = pdx.spec.as_ref().and_then(|s| s.template.spec.clone());
        assert_eq!(pdx_pod.and_then(|p| p.node_selector), None);
    }

    /// operator/mysql/README.md: log_bin, log_slave_updates=ON, gtid_strict_mode=ON, a unique
    /// server_id per site, read_only=ON at start; report_host = the internal Service.
    #[test]
    fn mysqld_args_configure_gtid_replication_per_site() {
        let iad = container(&render("iad"), "mysql").clone();
        assert_eq!(iad.image.as_deref(), Some("mariadb:10.11"));
        assert_eq!(
            iad.args,
            Some(vec![
                "--log-bin=mysql-bin".to_string(),
                "--server-id=1".to_string(),
                "--read-only=ON".to_string(),
                "--report-host=mysql-playground-iad.bloodraven-playground.svc.cluster.local"
                    .to_string(),
                "--pid-file=/run/bloodraven/mysqld.pid".to_string(),
                "--event-scheduler=ON".to_string(),
                "--log-slave-updates=ON".to_string(),
                "--gtid-strict-mode=ON".to_string(),
            ])
        );
        let ids: Vec<Option<usize>> = ["iad", "pdx", "reader", "nowhere"]
            .iter()
            .map(|site| server_id(&spec(), site))
            .collect();
        assert_eq!(ids, vec![Some(1), Some(2), Some(3), None]);
        let env = iad.env.expect("env");
        let root = env
            .iter()
            .find(|e| e.name == "MARIADB_ROOT_PASSWORD")
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("root password from the secret");
        assert_eq!(
            (root.name.as_str(), root.key.as_str()),
            ("mysql-playground-credentials", "root-password")
        );
        assert!(env
            .iter()
            .all(|e| e.value.as_deref() != Some("root-password")));
    }

    /// operator/sidecar's flags: group, site, all sites, lease, flavor, SRV peer discovery;
    /// port 8086 named sidecar; readiness on /healthz.
    #[test]
    fn sidecar_flags_port_and_readiness() {
        let set = render("pdx");
        let sidecar = container(&set, "sidecar");
        assert_eq!(
            sidecar.image.as_deref(),
            Some(format!("bloodraven/sidecar:{}", env!("CARGO_PKG_VERSION")).as_str())
        );
        assert_eq!(
            sidecar.args,
            Some(vec![
                "--group=playground".to_string(),
                "--site=pdx".to_string(),
                "--sites=iad,pdx,reader".to_string(),
                "--lease-duration-ms=6000".to_string(),
                "--mysql-flavor=mariadb".to_string(),
                "--peer-srv=_sidecar._tcp.mysql-playground-{site}.bloodraven-playground.svc.cluster.local"
                    .to_string(),
                "--mysqld-pid-file=/run/bloodraven/mysqld.pid".to_string(),
                "--operator-key-file=/etc/bloodraven/sidecar-keys/operator-verifying-key"
                    .to_string(),
                "--peer-key-file=/etc/bloodraven/sidecar-keys/peer-key".to_string(),
                "--backup-dir=/var/lib/bloodraven/backups".to_string(),
                "--mysql-datadir=/var/lib/mysql".to_string(),
                "--mysqld-gate-mark=/run/bloodraven/mysqld-gate-held".to_string(),
            ])
        );
        let port = &sidecar.ports.as_ref().expect("ports")[0];
        assert_eq!(
            (port.name.as_deref(), port.container_port),
            (Some("sidecar"), 8086)
        );
        let probe = sidecar
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("readiness");
        assert_eq!(probe.path.as_deref(), Some("/healthz"));
        assert_eq!(probe.port, IntOrString::String("sidecar".into()));
        // Core's SIDECAR_NOT_READY_WITHIN (8 s) is this window plus a second of status.
        let readiness = sidecar.readiness_probe.as_ref().expect("readiness");
        assert_eq!(
            (
                readiness.period_seconds,
                readiness.timeout_seconds,
                readiness.failure_threshold
            ),
            (Some(2), Some(1), Some(3))
        );
        assert_eq!(
            bloodraven_core::engine::SIDECAR_NOT_READY_WITHIN,
            std::time::Duration::from_secs(2 * 3 + 1 + 1)
        );
        let liveness = sidecar
            .liveness_probe
            .as_ref()
            .expect("sidecar liveness probe");
        let get = liveness.http_get.as_ref().expect("httpGet");
        assert_eq!(get.path.as_deref(), Some("/healthz"));
        assert_eq!(get.port, IntOrString::String("sidecar".into()));
        assert_eq!(
            (
                liveness.period_seconds,
                liveness.timeout_seconds,
                liveness.failure_threshold
            ),
            (Some(10), Some(5), Some(3))
        );
    }

    /// The watchdog's wiring: one process namespace, and mysqld's pid file on an emptyDir both
    /// containers mount where each of them names it.
    #[test]
    fn sidecar_can_find_and_signal_mysqld() {
        let set = render("iad");
        let pod = set
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec");
        assert_eq!(pod.share_process_namespace, Some(true));
        let user = container(&set, "sidecar")
            .security_context
            .as_ref()
            .and_then(|c| c.run_as_user);
        assert_eq!(
            user,
            Some(MYSQL_IMAGE_UID),
            "the sidecar runs as mysqld's user"
        );
        let volumes = pod.volumes.as_ref().expect("volumes");
        assert!(volumes
            .iter()
            .any(|v| v.name == RUN_VOLUME && v.empty_dir.is_some()));
        for name in ["mysql", "sidecar"] {
            let container = container(&set, name);
            let mounted = container.volume_mounts.as_ref().is_some_and(|m| {
                m.iter()
                    .any(|m| m.name == RUN_VOLUME && m.mount_path == RUN_MOUNT_PATH)
            });
            assert!(mounted, "{name} mounts {RUN_VOLUME} at {RUN_MOUNT_PATH}");
            let args = container.args.as_ref().expect("args");
            assert!(
                args.iter()
                    .any(|a| a.ends_with(&format!("pid-file={MYSQLD_PID_FILE}"))),
                "{name}: {args:?}"
            );
        }
        assert!(MYSQLD_PID_FILE.starts_with(RUN_MOUNT_PATH));
    }

    /// docs/design/history.md#issue-12-part-2: a backup volume claim per site, mounted into the
    /// sidecar alone (its `--backup-dir`), the data volume writable into the sidecar
    /// (`--mysql-datadir`, for `mariadb-backup` and the physical restore), mysqld started
    /// through the restore gate (`--mysqld-gate-mark`), and `fsGroup` = mysqld's gid so the
    /// sidecar's user may write the volumes. A StatefulSet made without the claim (claim
    /// templates are immutable) keeps that shape: no backup volume, no `--backup-dir`, no gate.
    #[test]
    fn backups_live_on_their_own_claim_mounted_into_the_sidecar() {
        let set = render("iad");
        assert!(live_has_backups(&set));
        let set_spec = set.spec.as_ref().expect("spec");
        let claims: Vec<_> = set_spec
            .volume_claim_templates
            .as_ref()
            .expect("claims")
            .iter()
            .filter_map(|claim| claim.metadata.name.as_deref())
            .collect();
        assert_eq!(claims, vec!["data", "backups"]);
        let pod = set_spec.template.spec.as_ref().expect("pod");
        assert_eq!(
            pod.security_context.as_ref().and_then(|c| c.fs_group),
            Some(MYSQL_IMAGE_UID)
        );
        let mounts = |name: &str| container(&set, name).volume_mounts.clone().expect("mounts");
        let sidecar = mounts("sidecar");
        let backup = sidecar
            .iter()
            .find(|m| m.name == BACKUP_VOLUME)
            .expect("sidecar mounts the backups");
        assert_eq!(
            (backup.mount_path.as_str(), backup.read_only),
            (BACKUP_MOUNT_PATH, None)
        );
        let data = sidecar
            .iter()
            .find(|m| m.name == DATA_VOLUME)
            .expect("sidecar sees the datadir");
        assert_eq!(
            (data.mount_path.as_str(), data.read_only),
            (DATA_MOUNT_PATH, None)
        );
        assert!(!mounts("mysql").iter().any(|m| m.name == BACKUP_VOLUME));
        // The gate: the journal on the data volume, the mark on the run volume both mount,
        // then the image's entrypoint with mysqld's args after it.
        let mysql = container(&set, "mysql");
        let command = mysql.command.clone().expect("the gate");
        assert_eq!(command[..2], ["/bin/sh", "-c"]);
        assert_eq!(command[2], bloodraven_api::sidecar::MYSQLD_GATE_SCRIPT);
        assert_eq!(
            command[4..],
            [
                "/var/lib/mysql/bloodraven-restore.json",
                MYSQLD_GATE_MARK,
                "docker-entrypoint.sh"
            ]
        );
        assert!(MYSQLD_GATE_MARK.starts_with(RUN_MOUNT_PATH));
        assert!(mysql.args.as_ref().expect("args")[0].starts_with("--log-bin"));

        let old = statefulset(
            &spec(),
            "playground",
            "ns",
            "iad",
            "mariadb:10.11",
            false,
            None,
        )
        .expect("iad");
        assert!(!live_has_backups(&old));
        assert_eq!(
            container(&old, "mysql").command,
            None,
            "no gate without the volume"
        );
        let old_claims = old
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.as_ref())
            .map(Vec::len);
        assert_eq!(old_claims, Some(1));
        let args = container(&old, "sidecar").args.clone().expect("args");
        assert!(
            !args.iter().any(|a| a.starts_with("--backup-dir")),
            "{args:?}"
        );
        assert!(!container(&old, "sidecar")
            .volume_mounts
            .as_ref()
            .expect("mounts")
            .iter()
            .any(|m| m.name == BACKUP_VOLUME || m.name == DATA_VOLUME));
    }

    /// The live image wins over a changed spec.image (the ordered update moves it per site), and a
    /// site outside the spec renders nothing.
    #[test]
    fn live_image_is_read_back_and_unknown_sites_render_nothing() {
        let set = statefulset(&spec(), "g", "ns", "iad", "mariadb:10.6", true, None).expect("iad");
        assert_eq!(live_mysql_image(&set), Some("mariadb:10.6"));
        assert!(statefulset(&spec(), "g", "ns", "nowhere", "mariadb:10.11", true, None).is_none());
    }

    /// The credentials Secret: both keys, random and distinct passwords, no owner (it outlives
    /// the group with the data volumes).
    #[test]
    fn secret_holds_two_random_passwords() {
        let (first, second) = (random_password(), random_password());
        assert_eq!(first.len(), PASSWORD_BYTES * 2);
        assert_ne!(first, second);
        let secret = secret("playground", "ns", first.clone(), second.clone());
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("mysql-playground-credentials")
        );
        assert_eq!(secret.metadata.owner_references, None);
        let data = secret.string_data.expect("data");
        assert_eq!(data.get("root-password"), Some(&first));
        assert_eq!(data.get("replication-password"), Some(&second));
    }

    /// docs/design/history.md#issue-10-case-8: the sidecar mounts only the verifying key and
    /// the peer key (from `mysql-<group>-sidecar-keys`, read-only, the sidecar container alone)
    /// and is never told to run unauthenticated; no pod references the operator's signing-key
    /// Secret.
    #[test]
    fn case_8_sidecar_mounts_the_verifying_and_peer_keys_only() {
        let set = render("iad");
        let pod = set
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec");
        let volumes = pod.volumes.as_ref().expect("volumes");
        let keys = volumes
            .iter()
            .find(|v| v.name == KEYS_VOLUME)
            .and_then(|v| v.secret.as_ref())
            .expect("a secret volume of the sidecar keys");
        assert_eq!(
            keys.secret_name.as_deref(),
            Some("mysql-playground-sidecar-keys")
        );
        assert_eq!(
            keys.optional,
            Some(false),
            "no sidecar starts without its keys"
        );
        let text = serde_json::to_string(&set).expect("json");
        assert!(
            !text.contains("operator-key\""),
            "the signing key Secret is never mounted"
        );
        assert!(!text.contains("mysql-playground-operator-key"), "{text}");
        assert!(!text.contains("insecure"), "never unauthenticated");
        let mounted = |name: &str| {
            container(&set, name)
                .volume_mounts
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m.name == KEYS_VOLUME))
        };
        assert!(!mounted("mysql"), "mysqld does not see the keys");
        let mount = container(&set, "sidecar")
            .volume_mounts
            .as_ref()
            .and_then(|m| m.iter().find(|m| m.name == KEYS_VOLUME))
            .expect("sidecar mounts the keys");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            (KEYS_MOUNT_PATH, Some(true))
        );
    }

    /// docs/design/history.md#issue-10-case-8: the key Secrets: the signing seed alone in one,
    /// the verifying half (matching it) and a peer key in the other; hex that the sidecar and
    /// operator parse.
    #[test]
    fn case_8_key_secrets_split_the_signing_seed_from_what_sidecars_mount() {
        let seed = [4u8; KEY_BYTES];
        let signing = operator_key_secret_object("playground", "ns", &seed);
        assert_eq!(
            signing.metadata.name.as_deref(),
            Some("mysql-playground-operator-key")
        );
        assert_eq!(signing.metadata.owner_references, None);
        let key = secret_text(&signing, SECRET_KEY_SIGNING_KEY)
            .and_then(|text| OperatorKey::from_hex(&text).ok())
            .expect("seed parses");
        let data = signing.string_data.as_ref().expect("data");
        assert_eq!(data.len(), 1, "only the seed");
        let published =
            sidecar_keys_secret_object("playground", "ns", &key.verifying_key(), &[6; KEY_BYTES]);
        assert_eq!(
            published.metadata.name.as_deref(),
            Some("mysql-playground-sidecar-keys")
        );
        let verifying = secret_text(&published, SECRET_KEY_OPERATOR_VERIFYING_KEY)
            .and_then(|text| OperatorVerifyingKey::from_hex(&text).ok());
        assert_eq!(verifying, Some(key.verifying_key()));
        let peer = secret_text(&published, SECRET_KEY_PEER_KEY).expect("peer key");
        assert!(bloodraven_api::auth::PeerKey::from_hex(&peer).is_ok());
        let published_data = published.string_data.as_ref().expect("data");
        assert!(
            !published_data
                .values()
                .any(|value| value.contains(&to_hex(&seed))),
            "the seed is not published"
        );
        assert_eq!(
            (
                SECRET_KEY_OPERATOR_VERIFYING_KEY,
                SECRET_KEY_PEER_KEY,
                KEYS_MOUNT_PATH
            ),
            (
                "operator-verifying-key",
                "peer-key",
                "/etc/bloodraven/sidecar-keys"
            )
        );
    }
}
