//! Gather: everything one poll reads, turned into core's [`Observation`].
//!
//! Read order (core's contract): every other site before the site memory names active, so a
//! replica's GTID set read first is a subset of the active site's read after it. The other
//! sites are read concurrently, each sidecar within [`round_trip_budget`] of the poll
//! interval, and the DNSEndpoint and deploy leases alongside. Every error is an unknown
//! recorded in the observation, never a reason to skip the poll.

use bloodraven_api::{names, sidecar::LeaseTerms, DNSEndpoint, MysqlFailoverGroup, Timestamp};
use bloodraven_core::deploy::{DeployLeases, HoldInfo};
use bloodraven_core::engine::{DnsReading, PodFacts, PodReading, SidecarReading, SiteObservation};
use bloodraven_core::{GroupMemory, Observation};
use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod, Service};
use kube::{Api, Client};

use crate::deploy_api::store::LeaseStore;
use crate::memory::annotations_of;
use crate::sidecar::{round_trip_budget, SidecarClient};
use crate::workloads::{CONTAINER_MYSQL, CONTAINER_SIDECAR};

/// Operation id reported when the deploy-lease state could not be read: planned disruption
/// is deferred by one poll rather than risk ignoring a live hold.
pub const UNREADABLE_HOLD: &str = "unreadable-deploy-lease-state";

/// What the cluster objects of one site say (pure input of [`site_observation`]).
#[derive(Clone, Debug, Default)]
pub struct SiteObjects {
    /// The site pod, if it exists.
    pub pod: Option<Pod>,
    /// The pod read failed: `pod` is `None`, and the pod may exist all the same.
    pub pod_unreadable: bool,
    /// The internal per-site Service, if it exists.
    pub service: Option<Service>,
    /// The pod's node, read only while the site's sidecar does not answer (the agentless
    /// rule needs its `Ready` condition then, and only then).
    pub node: Option<Node>,
}

/// The kubelet's status of the pod's container `name`.
fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|status| status.name == name)
}

/// The site pod as core's agentless rule reads it (pure): uid, creation, deletion, the
/// kubelet's container readiness, and its node's `Ready` condition.
pub fn pod_reading(objects: &SiteObjects) -> PodReading {
    let Some(pod) = &objects.pod else {
        return if objects.pod_unreadable {
            PodReading::Unknown
        } else {
            PodReading::Absent
        };
    };
    let (Some(uid), Some(created)) = (
        pod.metadata.uid.clone(),
        pod.metadata.creation_timestamp.as_ref(),
    ) else {
        return PodReading::Unknown;
    };
    let container = |name: &str| container_status(pod, name);
    let node_ready = objects.node.as_ref().map(|node| {
        node.status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|ready| ready.status == "True")
    });
    PodReading::Present(PodFacts {
        uid,
        created_at: Timestamp::from_unix_millis(created.0.as_millisecond()),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        sidecar_ready: container(CONTAINER_SIDECAR).is_some_and(|status| status.ready),
        mysql_running: container(CONTAINER_MYSQL)
            .and_then(|status| status.state.as_ref())
            .is_some_and(|state| state.running.is_some()),
        mysql_image: pod
            .spec
            .as_ref()
            .and_then(|spec| {
                spec.containers
                    .iter()
                    .find(|container| container.name == crate::workloads::CONTAINER_MYSQL)
            })
            .and_then(|container| container.image.clone()),
        node_ready,
    })
}

/// One site's observation from its sidecar reading and objects at `now` (pure).
pub fn site_observation(
    site: &str,
    sidecar: SidecarReading,
    objects: &SiteObjects,
    now: Timestamp,
) -> SiteObservation {
    let node_name = objects
        .pod
        .as_ref()
        .and_then(|pod| pod.spec.as_ref())
        .and_then(|spec| spec.node_name.clone());
    let service_cluster_ip = objects
        .service
        .as_ref()
        .and_then(|service| service.spec.as_ref())
        .and_then(|spec| spec.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    let sidecar_uptime = objects
        .pod
        .as_ref()
        .and_then(|pod| container_status(pod, CONTAINER_SIDECAR))
        .and_then(|status| status.state.as_ref())
        .and_then(|state| state.running.as_ref())
        .and_then(|running| running.started_at.as_ref())
        .map(|started| {
            let started = Timestamp::from_unix_millis(started.0.as_millisecond());
            now.saturating_duration_since(started)
        });
    SiteObservation {
        site: site.to_string(),
        sidecar,
        node_name,
        service_cluster_ip,
        sidecar_uptime,
        pod_lease_terms: objects.pod.as_ref().and_then(pod_lease_terms),
        pod: pod_reading(objects),
    }
}

/// The sidecar's default lease duration when its flags name none (its `Config` default).
const SIDECAR_LEASE_DURATION_MS_DEFAULT: u64 = 6000;

/// The lease terms a site pod's sidecar container was created with, from its flags
/// (`--sites`, `--lease-duration-ms`, as `workloads::sidecar_args` renders them) or the
/// environment variables the sidecar also reads (pure). Pods are never changed in place, so
/// these are what the running sidecar grants with even when it does not answer. `None`: no
/// sidecar container or no site list.
pub fn pod_lease_terms(pod: &Pod) -> Option<LeaseTerms> {
    let container = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|container| container.name == CONTAINER_SIDECAR)?;
    let args = container.args.as_deref().unwrap_or_default();
    let env = |name: &str| {
        container
            .env
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|var| var.name == name)
            .and_then(|var| var.value.clone())
    };
    let flag = |name: &str| {
        let prefix = format!("{name}=");
        args.iter().enumerate().find_map(|(index, arg)| {
            if let Some(value) = arg.strip_prefix(&prefix) {
                Some(value.to_string())
            } else if arg == name {
                args.get(index + 1).cloned()
            } else {
                None
            }
        })
    };
    let sites: Vec<String> = flag("--sites")
        .or_else(|| env("BLOODRAVEN_SITES"))?
        .split(',')
        .map(str::trim)
        .filter(|site| !site.is_empty())
        .map(str::to_string)
        .collect();
    if sites.is_empty() {
        return None;
    }
    let duration_ms = flag("--lease-duration-ms")
        .or_else(|| env("BLOODRAVEN_LEASE_DURATION_MS"))
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(SIDECAR_LEASE_DURATION_MS_DEFAULT);
    Some(LeaseTerms { duration_ms, sites })
}

/// The DNSEndpoint reading from a get (pure).
pub fn dns_reading(result: Result<Option<DNSEndpoint>, kube::Error>) -> DnsReading {
    match result {
        Ok(None) => DnsReading::Absent,
        Ok(Some(endpoint)) => DnsReading::Present(endpoint.spec),
        Err(error) => DnsReading::Unknown {
            error: format!("get dnsendpoint: {error}"),
        },
    }
}

/// What one poll read.
#[derive(Clone, Debug)]
pub struct Gathered {
    /// The observation for `decide`.
    pub observation: Observation,
    /// The group's stored deploy-lease state (`None`: unreadable).
    pub deploy_leases: Option<DeployLeases>,
}

/// Reads one poll's observation of `group`.
pub async fn gather(
    client: &Client,
    sidecars: &SidecarClient,
    store: &LeaseStore,
    group: &MysqlFailoverGroup,
    memory: &GroupMemory,
    now_of: impl Fn() -> Timestamp,
) -> Gathered {
    let polled_at = now_of();
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let name = group.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let nodes: Api<Node> = Api::all(client.clone());

    let budget = round_trip_budget(group.spec.poll_interval.get());
    let site_names: Vec<&str> = group
        .spec
        .sites
        .iter()
        .map(|site| site.name.as_str())
        .filter(|site| *site != memory.active_site)
        .collect();
    let read_sites = async {
        let mut sites = futures::future::join_all(site_names.iter().map(|site| {
            read_site(
                &pods, &services, &nodes, sidecars, &name, site, &namespace, budget, &now_of,
            )
        }))
        .await;
        if group.spec.site(&memory.active_site).is_some() {
            sites.push(
                read_site(
                    &pods,
                    &services,
                    &nodes,
                    sidecars,
                    &name,
                    &memory.active_site,
                    &namespace,
                    budget,
                    &now_of,
                )
                .await,
            );
        }
        sites
    };
    // The DNSEndpoint and the deploy leases have no place in the sites' read order: they are
    // read while the sites are.
    let dns_api: Api<DNSEndpoint> = Api::namespaced(client.clone(), &namespace);
    let dns_name = names::dns_endpoint(&name);
    let (sites, dns, leases) = tokio::join!(
        read_sites,
        dns_api.get_opt(&dns_name),
        store.load(&namespace, &name)
    );
    let dns = dns_reading(dns);

    let mut deploy_leases = None;
    let deploy_hold = match leases {
        Ok(leases) => {
            let hold = hold_after_fence(&leases, memory.topology_generation, now_of());
            deploy_leases = Some(leases);
            hold
        }
        Err(error) => {
            tracing::warn!(group = %name, namespace = %namespace, %error, "deploy lease state unreadable; deferring planned disruption this poll");
            Some(HoldInfo {
                earliest_expiry: now_of() + group.spec.poll_interval.get(),
                operation_id: UNREADABLE_HOLD.to_string(),
                instance: String::new(),
            })
        }
    };

    let verifying = sidecars
        .signing_keys()
        .get(&namespace, &name)
        .map(|key| key.verifying_key());
    let annotations = annotations_of(group, verifying.as_ref());
    Gathered {
        observation: Observation {
            group: name,
            namespace,
            sites,
            annotations,
            deploy_hold,
            dns,
            polled_at: Some(polled_at),
        },
        deploy_leases,
    }
}

/// The live failover-hold as `decide` must see it (pure): a hold stamped with another
/// topology generation than the current one is already revoked by the fence
/// (docs/design/requirements.md R003.20), even if the write of its tombstone has not happened
/// yet.
pub fn hold_after_fence(
    leases: &DeployLeases,
    topology_generation: u64,
    now: Timestamp,
) -> Option<HoldInfo> {
    let mut fenced = leases.clone();
    fenced.fence_generation(topology_generation, now);
    fenced.live_hold(now)
}

/// One site's pod, internal Service and sidecar status, read concurrently; the sidecar
/// within `budget` ([`round_trip_budget`]).
#[allow(clippy::too_many_arguments)]
async fn read_site(
    pods: &Api<Pod>,
    services: &Api<Service>,
    nodes: &Api<Node>,
    sidecars: &SidecarClient,
    group: &str,
    site: &str,
    namespace: &str,
    budget: std::time::Duration,
    now_of: &impl Fn() -> Timestamp,
) -> SiteObservation {
    let pod_name = names::pod(group, site);
    let service_name = names::site_service(group, site);
    let (pod, service, reading) = tokio::join!(
        pods.get_opt(&pod_name),
        services.get_opt(&service_name),
        sidecars.status(group, site, namespace, budget),
    );
    let pod_unreadable = pod.is_err();
    let pod = pod.unwrap_or_else(|error| {
        tracing::debug!(group, site, %error, "site pod unreadable");
        None
    });
    // The node only matters while the sidecar does not answer (core's agentless rule), and
    // is read within the same budget: a hanging read must not stall the poll.
    let node_name = pod
        .as_ref()
        .and_then(|pod| pod.spec.as_ref())
        .and_then(|spec| spec.node_name.clone());
    let node = match (&reading, node_name) {
        (SidecarReading::Unreachable { .. }, Some(node_name)) => {
            match tokio::time::timeout(budget, nodes.get_opt(&node_name)).await {
                Ok(Ok(node)) => node,
                Ok(Err(error)) => {
                    tracing::debug!(group, site, node = %node_name, %error, "node unreadable");
                    None
                }
                Err(_) => {
                    tracing::debug!(group, site, node = %node_name, "node read timed out");
                    None
                }
            }
        }
        _ => None,
    };
    let objects = SiteObjects {
        pod,
        pod_unreadable,
        service: service.unwrap_or_else(|error| {
            tracing::debug!(group, site, %error, "site service unreadable");
            None
        }),
        node,
    };
    site_observation(site, reading, &objects, now_of())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, NodeCondition, NodeStatus, PodSpec,
        PodStatus, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn objects(cluster_ip: &str, started_millis: i64) -> SiteObjects {
        let started = jiff::Timestamp::from_millisecond(started_millis).expect("timestamp");
        SiteObjects {
            pod: Some(Pod {
                spec: Some(PodSpec {
                    node_name: Some("iad".into()),
                    ..PodSpec::default()
                }),
                status: Some(PodStatus {
                    container_statuses: Some(vec![
                        ContainerStatus {
                            name: CONTAINER_MYSQL.into(),
                            ..ContainerStatus::default()
                        },
                        ContainerStatus {
                            name: CONTAINER_SIDECAR.into(),
                            state: Some(ContainerState {
                                running: Some(ContainerStateRunning {
                                    started_at: Some(Time(started)),
                                }),
                                ..ContainerState::default()
                            }),
                            ..ContainerStatus::default()
                        },
                    ]),
                    ..PodStatus::default()
                }),
                ..Pod::default()
            }),
            service: Some(Service {
                spec: Some(ServiceSpec {
                    cluster_ip: Some(cluster_ip.into()),
                    ..ServiceSpec::default()
                }),
                ..Service::default()
            }),
            ..SiteObjects::default()
        }
    }

    fn node(ready: &str) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    /// Core's agentless rule reads uid, creation, deletion, the kubelet's container states
    /// and the node's Ready condition; a failed read is unknown, never "gone".
    #[test]
    fn pod_reading_tells_absent_from_unreadable_and_reads_the_kubelet() {
        assert_eq!(pod_reading(&SiteObjects::default()), PodReading::Absent);
        let unreadable = SiteObjects {
            pod_unreadable: true,
            ..SiteObjects::default()
        };
        assert_eq!(pod_reading(&unreadable), PodReading::Unknown);

        let mut site = objects("10.96.0.1", 1_700_000_000_000);
        // No uid yet (not from the API server): unknown.
        assert_eq!(pod_reading(&site), PodReading::Unknown);
        let pod = site.pod.as_mut().expect("pod");
        pod.metadata.uid = Some("u-1".into());
        pod.metadata.creation_timestamp = Some(Time(
            jiff::Timestamp::from_millisecond(1_699_999_000_000).expect("timestamp"),
        ));
        let statuses = pod
            .status
            .as_mut()
            .and_then(|status| status.container_statuses.as_mut())
            .expect("statuses");
        statuses[0].state = Some(ContainerState {
            running: Some(ContainerStateRunning { started_at: None }),
            ..ContainerState::default()
        });
        statuses[1].ready = false;
        site.node = Some(node("True"));
        assert_eq!(
            pod_reading(&site),
            PodReading::Present(PodFacts {
                uid: "u-1".into(),
                created_at: Timestamp::from_unix_millis(1_699_999_000_000),
                terminating: false,
                sidecar_ready: false,
                mysql_running: true,
                mysql_image: None,
                node_ready: Some(true),
            })
        );
        site.node = Some(node("Unknown"));
        let PodReading::Present(facts) = pod_reading(&site) else {
            panic!("present");
        };
        assert_eq!(facts.node_ready, Some(false));
        site.node = None;
        let pod = site.pod.as_mut().expect("pod");
        pod.metadata.deletion_timestamp = pod.metadata.creation_timestamp.clone();
        pod.status
            .as_mut()
            .and_then(|status| status.container_statuses.as_mut())
            .expect("statuses")[1]
            .ready = true;
        let PodReading::Present(facts) = pod_reading(&site) else {
            panic!("present");
        };
        assert!(facts.terminating && facts.sidecar_ready);
        assert_eq!(facts.node_ready, None);
    }

    /// Core's Observation contract: node of the site pod (taint target), ClusterIP of the
    /// internal Service (DNS target), sidecar uptime from its container's start.
    #[test]
    fn site_observation_reads_node_cluster_ip_and_sidecar_uptime() {
        let now = Timestamp::from_unix_millis(100_000);
        let reading = SidecarReading::Unreachable { error: "x".into() };
        let site = site_observation(
            "iad",
            reading.clone(),
            &objects("10.96.100.10", 40_000),
            now,
        );
        assert_eq!(site.site, "iad");
        assert_eq!(site.sidecar, reading);
        assert_eq!(site.node_name.as_deref(), Some("iad"));
        assert_eq!(site.service_cluster_ip.as_deref(), Some("10.96.100.10"));
        assert_eq!(
            site.sidecar_uptime,
            Some(std::time::Duration::from_secs(60))
        );
        // A headless or missing Service has no DNS target; a missing pod no node.
        let site = site_observation("iad", reading.clone(), &objects("None", 0), now);
        assert_eq!(site.service_cluster_ip, None);
        let site = site_observation("iad", reading, &SiteObjects::default(), now);
        assert_eq!(
            (site.node_name, site.service_cluster_ip, site.sidecar_uptime),
            (None, None, None)
        );
    }

    /// docs/design/history.md#issue-10-case-4: the lease terms of a site pod are read back from
    /// the flags the operator rendered for its sidecar, so the old primary's terms are known
    /// while its sidecar does not answer; a pod without them has none.
    #[test]
    fn pod_lease_terms_are_the_rendered_sidecar_flags() {
        use k8s_openapi::api::core::v1::{Container, EnvVar};
        let mut spec = crate::test_support::playground_group("2s").spec;
        spec.write_lease.duration = Some(bloodraven_api::GoDuration::from_secs(9));
        let sidecar = |args: Vec<String>, env: Vec<EnvVar>| Pod {
            spec: Some(PodSpec {
                containers: vec![
                    Container {
                        name: CONTAINER_MYSQL.into(),
                        args: Some(vec!["--sites=wrong".into()]),
                        ..Container::default()
                    },
                    Container {
                        name: CONTAINER_SIDECAR.into(),
                        args: Some(args),
                        env: Some(env),
                        ..Container::default()
                    },
                ],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let rendered = crate::workloads::sidecar_args(&spec, "playground", "pdx", "ns", true);
        assert_eq!(
            pod_lease_terms(&sidecar(rendered, Vec::new())),
            Some(LeaseTerms {
                duration_ms: 9000,
                sites: vec!["iad".into(), "pdx".into(), "reader".into()],
            })
        );
        let by_env = sidecar(
            vec!["--group=playground".into()],
            vec![EnvVar {
                name: "BLOODRAVEN_SITES".into(),
                value: Some("iad,pdx".into()),
                ..EnvVar::default()
            }],
        );
        assert_eq!(
            pod_lease_terms(&by_env),
            Some(LeaseTerms {
                duration_ms: SIDECAR_LEASE_DURATION_MS_DEFAULT,
                sites: vec!["iad".into(), "pdx".into()],
            })
        );
        assert_eq!(pod_lease_terms(&sidecar(Vec::new(), Vec::new())), None);
        assert_eq!(pod_lease_terms(&Pod::default()), None);
    }

    /// docs/design/requirements.md R000.13: the DNS record is read back every poll; a failed
    /// read is an unknown.
    #[test]
    fn dns_reading_distinguishes_absent_present_and_unknown() {
        assert_eq!(dns_reading(Ok(None)), DnsReading::Absent);
        let spec = bloodraven_api::DNSEndpointSpec::a_record("db.example", "10.0.0.1", 10);
        assert_eq!(
            dns_reading(Ok(Some(DNSEndpoint::new("bloodraven-g", spec.clone())))),
            DnsReading::Present(spec)
        );
        let error = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(matches!(
            dns_reading(Err(error)),
            DnsReading::Unknown { .. }
        ));
    }

    /// docs/design/history.md#issue-8 / docs/design/requirements.md R001.9 (detection floor
    /// pollInterval x failureThreshold): with every sidecar hanging, a gather still ends within
    /// the poll interval (two sequential rounds of status reads, each bounded by the interval's
    /// round-trip budget), and every site reads as unreachable, not skipped.
    #[tokio::test]
    async fn a_gather_of_hanging_sidecars_ends_within_the_poll_interval() {
        let (address, silent) = crate::test_support::silent_listener().await;
        // Nothing listens for the API server: its reads fail at once, as unknowns.
        let client = crate::test_support::unreachable_api_client();
        let sidecars = SidecarClient::new(crate::sidecar::SidecarAddressing::new(format!(
            "http://{address}/{{site}}"
        )))
        .expect("sidecars");
        let store = LeaseStore::new(client.clone());
        let poll_interval = std::time::Duration::from_millis(1500);
        let group = crate::test_support::playground_group("1500ms");
        let clock = || Timestamp::from_unix_millis(jiff::Timestamp::now().as_millisecond());
        let memory = GroupMemory::from_status(&group.spec, None, clock());
        let started = std::time::Instant::now();
        let gathered = gather(&client, &sidecars, &store, &group, &memory, clock).await;
        let took = started.elapsed();
        assert!(took < poll_interval, "gather took {took:?}");
        let sites: Vec<&str> = gathered
            .observation
            .sites
            .iter()
            .map(|site| site.site.as_str())
            .collect();
        assert_eq!(sites, ["pdx", "reader", "iad"], "the active site read last");
        for site in &gathered.observation.sites {
            assert!(
                matches!(&site.sidecar, SidecarReading::Unreachable { error } if error.contains("timed out")),
                "{site:?}"
            );
        }
        silent.abort();
    }

    /// docs/design/requirements.md R003.19-R003.20: the generation is the fence; a hold granted
    /// under an older generation defers nothing, even before its tombstone is written.
    #[test]
    fn seed_003_a_hold_of_an_older_generation_defers_nothing() {
        use bloodraven_core::deploy::{LeaseKind, LeaseRecord, LeaseToken};
        let now = Timestamp::from_unix_millis(10_000);
        let ttl = std::time::Duration::from_secs(30);
        let hold = |generation| LeaseRecord {
            kind: LeaseKind::FailoverHold,
            operation_id: "a1".into(),
            instance: "counter-app".into(),
            token_hash: LeaseToken::new("t").hash(),
            granted_at: now,
            expires_at: now + ttl,
            ttl,
            topology_generation: generation,
        };
        let current = DeployLeases::from_parts([hold(4)], []).expect("leases");
        let live = hold_after_fence(&current, 4, now).expect("live hold");
        assert_eq!(
            (live.operation_id.as_str(), live.earliest_expiry),
            ("a1", now + ttl)
        );
        let stale = DeployLeases::from_parts([hold(3)], []).expect("leases");
        assert_eq!(hold_after_fence(&stale, 4, now), None);
    }
}
