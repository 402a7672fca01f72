//! Target port resolution shared by the EndpointSlice and Endpoints controllers: upstream's `FindPort`.

use crate::model::{ContainerPort, ServicePort, TargetPort};

/// The port number a service port targets on a pod with these named container ports. A number is
/// taken as it is (no container needs to declare it); a name is looked up in regular containers
/// first, then in sidecars, and must match the service port's protocol too. `None`: the pod lacks
/// the named port, so it serves nothing on this service port.
pub fn target_port_number(named: &[ContainerPort], port: &ServicePort) -> Option<i32> {
    let name = match &port.target_port {
        TargetPort::Number(n) => return Some(*n),
        TargetPort::Name(name) => name.as_str(),
    };
    let matching = |sidecar: bool| {
        named.iter().find(|c| {
            c.sidecar == sidecar && c.name.as_str() == name && c.protocol == port.protocol
        })
    };
    matching(false).or_else(|| matching(true)).map(|c| c.port)
}

/// True when the service resolves the same ports on every pod: no target port is named.
pub fn numeric_only(ports: &[ServicePort]) -> bool {
    ports
        .iter()
        .all(|p| matches!(p.target_port, TargetPort::Number(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Name, Protocol};

    fn named(name: &str, port: i32, protocol: Protocol, sidecar: bool) -> ContainerPort {
        ContainerPort {
            name: Name::new(name),
            port,
            protocol,
            sidecar,
        }
    }

    fn service_port(target: TargetPort, protocol: Protocol) -> ServicePort {
        ServicePort {
            name: Name::new("p"),
            port: 80,
            target_port: target,
            protocol,
            app_protocol: None,
            node_port: None,
        }
    }

    #[test]
    fn numbers_need_no_container_port() {
        let sp = service_port(TargetPort::Number(9090), Protocol::Tcp);
        assert_eq!(target_port_number(&[], &sp), Some(9090));
    }

    #[test]
    fn names_match_name_and_protocol_containers_before_sidecars() {
        let ports = [
            named("http", 1, Protocol::Tcp, true),
            named("http", 2, Protocol::Udp, false),
            named("http", 3, Protocol::Tcp, false),
        ];
        let tcp = service_port(TargetPort::Name(Name::new("http")), Protocol::Tcp);
        assert_eq!(target_port_number(&ports, &tcp), Some(3));
        assert_eq!(target_port_number(&ports[..1], &tcp), Some(1));
        let sctp = service_port(TargetPort::Name(Name::new("http")), Protocol::Sctp);
        assert_eq!(target_port_number(&ports, &sctp), None);
    }
}
