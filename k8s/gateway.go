package k8s

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// gatewayName is the name of the gateway's Deployment and Service.
func gatewayName(o Options) string { return o.Batch + "-model-gateway" }

// gatewayLabels select the gateway's pods (not the runs': component model-gateway).
func gatewayLabels(o Options) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "pab", "app.kubernetes.io/component": "model-gateway", "pab.dev/batch": o.Batch}
}

// gatewayObjects are the model gateway of o: its Deployment (hardened as pab's own
// containers, its secrets from secretKeyRefs), its Service, the NetworkPolicy that lets
// the batch's run pods reach it on its port (and kube-dns, to resolve its name) and
// nothing else, and the gateway's own policy: ingress only from the run pods. Its egress
// is left open: it must reach the model provider.
func gatewayObjects(o Options) []any {
	g := o.Gateway
	name := gatewayName(o)
	port := intstr.FromInt32(int32(g.Port))
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	c := corev1.Container{
		Name:    "gateway",
		Image:   g.Image,
		Command: g.Command,
		Args:    g.Args,
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: int32(g.Port), Protocol: tcp}},
		Env:     secretEnv(g.SecretEnv),
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}},
			PeriodSeconds: 5},
		Resources:       res("100m", "256Mi", "1Gi"),
		SecurityContext: hardened(false),
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: gatewayLabels(o)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(g.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: gatewayLabels(o)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: gatewayLabels(o)},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(runAsID)),
						RunAsGroup:     ptr(int64(runAsID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers:       []corev1.Container{c},
					ImagePullSecrets: pullSecrets(o.ImagePullSecrets),
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: gatewayLabels(o)},
		Spec: corev1.ServiceSpec{
			Selector: gatewayLabels(o),
			Ports:    []corev1.ServicePort{{Name: "http", Port: int32(g.Port), TargetPort: port, Protocol: tcp}},
		},
	}
	toGateway := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(o, o.Batch+"-to-model-gateway", nil),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels(o)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: gatewayLabels(o)}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				},
				{
					To: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
				},
			},
		},
	}
	gatewayIn := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ingress", Namespace: o.Namespace, Labels: gatewayLabels(o)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: gatewayLabels(o)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: labels(o)}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	return []any{dep, svc, toGateway, gatewayIn}
}
