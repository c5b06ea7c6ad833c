//! An applied configuration's instances booted as hosts (`hpc_emulators::hosts`): each from the image of its
//! cloud's test (Debian 12 or 13, made by the test command), with its own address, its instance's metadata
//! listener on the emulator (`POST /_admin/metadata`) and its user data run by Debian's cloud-init.

use std::collections::BTreeMap;
use std::time::Duration;

use hpc_emulators::hosts::{self, Emulator, Gpus, Host, Network, Platform};

use crate::examples::Emulators;

/// The image and Slurm version each cloud's booted hosts run: both Debian releases are covered, each on
/// two clouds, and each with the cloud-init datasource it has (Ec2 on AWS, Oracle on OCI).
pub fn image_of(cloud: &str) -> (u32, &'static str) {
    match cloud {
        "aws" | "gcp" => (12, "22.05"),
        _ => (13, "24.11"),
    }
}

/// The emulator of `cloud`, as booting needs it.
pub fn emulator(clouds: &Emulators, cloud: &str) -> Emulator {
    let (platform, endpoint, azure_ca) = match cloud {
        "aws" => (Platform::Aws, clouds.aws.endpoint.clone(), None),
        "gcp" => (Platform::Gcp, clouds.gcp.clone(), None),
        "azure" => (Platform::Azure, clouds.azure.0.clone(), Some(clouds.azure.1.clone())),
        _ => (Platform::Oci, clouds.oci.0.clone(), None),
    };
    Emulator { platform, endpoint, azure_ca }
}

/// The hosts of one configuration, on one network.
pub struct Booted {
    emulator: Emulator,
    image: std::path::PathBuf,
    pub net: Network,
    pub hosts: BTreeMap<String, Host>,
}

impl Booted {
    /// A network for the hosts of `cidr` (the fabric's network).
    pub fn new(clouds: &Emulators, cloud: &str, cidr: &str) -> Booted {
        Booted {
            emulator: emulator(clouds, cloud),
            image: hosts::image(image_of(cloud).0),
            net: Network::new(cidr).expect("a network for the booted hosts"),
            hosts: BTreeMap::new(),
        }
    }

    /// Boots the instance named `instance` (stand-in GPUs: `gpus`) as the host `host` (its Slurm name).
    pub fn boot(&mut self, host: &str, instance: &str, gpus: Option<Gpus>) -> &Host {
        let spec = self.emulator.host_spec(host, instance, &self.image, gpus).unwrap_or_else(|e| panic!("{e}"));
        let booted = self.net.boot(&spec).unwrap_or_else(|e| panic!("booting {instance}: {e}"));
        self.hosts.insert(host.to_owned(), booted);
        &self.hosts[host]
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts.get(name).unwrap_or_else(|| panic!("{name} is not booted"))
    }

    /// Waits until every host has booted (systemd and cloud-init done).
    pub fn wait_booted(&self) {
        for (name, h) in &self.hosts {
            h.wait_booted(Duration::from_secs(420)).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    /// Removes the instance the host `host` runs on behind the tool's back (terminated or deleted, as the cloud
    /// does it), and stops the host.
    pub fn lose(&mut self, host: &str, instance: &str) {
        let id = self.emulator.instance_id(instance).unwrap_or_else(|| panic!("no live instance {instance}"));
        let action = match self.emulator.platform {
            Platform::Aws | Platform::Oci => "terminate_instance",
            Platform::Gcp | Platform::Azure => "delete",
        };
        self.emulator.admin_call("POST", "out-of-band", Some(serde_json::json!({"action": action, "id": id})));
        self.stop(host);
    }

    /// The cloud's name of the instance of scale set `set` that no booted host runs (Azure: a VM made again
    /// gets a new instance id, `<set>_<id>`).
    pub fn unbooted_vm(&self, set: &str) -> String {
        let booted: Vec<&str> = self.hosts.values().map(|h| h.instance_id.as_str()).collect();
        self.emulator
            .instances_of(set)
            .into_iter()
            .find(|(id, _)| !booted.iter().any(|b| b.eq_ignore_ascii_case(id)))
            .map(|(_, name)| name)
            .unwrap_or_else(|| panic!("every VM of {set} is booted"))
    }

    /// Stops a host (the instance went away or is replaced).
    pub fn stop(&mut self, name: &str) {
        if let Some(h) = self.hosts.remove(name) {
            h.stop(Duration::from_secs(20));
        }
    }
}
