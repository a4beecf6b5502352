package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// The NopResource kind, as crossplane-rs's provider-nop serves it (deploy/crds/nopresources.nop.crossplane.io.yaml):
// cluster-scoped, nop.crossplane.io/v1alpha1, with upstream provider-nop's fields. This program never installs
// the CRD; the test bed installs the generated one.
var (
	// GroupVersion of NopResource.
	GroupVersion = schema.GroupVersion{Group: "nop.crossplane.io", Version: "v1alpha1"}
	// NopResourceGroupVersionKind is the kind reconciled here.
	NopResourceGroupVersionKind = GroupVersion.WithKind("NopResource")
)

// ResourceConditionAfter is a condition to set once the resource is Time old.
type ResourceConditionAfter struct {
	Time            string `json:"time"`
	ConditionType   string `json:"conditionType"`
	ConditionStatus string `json:"conditionStatus"`
	ConditionReason string `json:"conditionReason,omitempty"`
}

// ResourceConnectionDetail is a connection detail to emit.
type ResourceConnectionDetail struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// NopResourceParameters is what the NopResource is told to do.
type NopResourceParameters struct {
	ConditionAfter    []ResourceConditionAfter   `json:"conditionAfter,omitempty"`
	ConnectionDetails []ResourceConnectionDetail `json:"connectionDetails,omitempty"`
	Fields            *runtime.RawExtension      `json:"fields,omitempty"`
}

// NopResourceSpec is the desired state.
type NopResourceSpec struct {
	xpv2.ClusterManagedResourceSpec `json:",inline"`
	ForProvider                     NopResourceParameters `json:"forProvider"`
}

// NopResourceObservation is what was observed.
type NopResourceObservation struct {
	Fields *runtime.RawExtension `json:"fields,omitempty"`
}

// NopResourceStatus is the observed state.
type NopResourceStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 NopResourceObservation `json:"atProvider,omitempty"`
}

// NopResource is a managed resource that orchestrates nothing.
type NopResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NopResourceSpec   `json:"spec"`
	Status NopResourceStatus `json:"status,omitempty"`
}

// NopResourceList is a list of NopResources.
type NopResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NopResource `json:"items"`
}

// The methods crossplane-runtime's resource.LegacyManaged asks for.

// GetCondition of this NopResource.
func (mg *NopResource) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return mg.Status.GetCondition(ct)
}

// SetConditions of this NopResource.
func (mg *NopResource) SetConditions(c ...xpv2.Condition) { mg.Status.SetConditions(c...) }

// GetDeletionPolicy of this NopResource.
func (mg *NopResource) GetDeletionPolicy() xpv2.DeletionPolicy { return mg.Spec.DeletionPolicy }

// SetDeletionPolicy of this NopResource.
func (mg *NopResource) SetDeletionPolicy(r xpv2.DeletionPolicy) { mg.Spec.DeletionPolicy = r }

// GetManagementPolicies of this NopResource.
func (mg *NopResource) GetManagementPolicies() xpv2.ManagementPolicies {
	return mg.Spec.ManagementPolicies
}

// SetManagementPolicies of this NopResource.
func (mg *NopResource) SetManagementPolicies(r xpv2.ManagementPolicies) {
	mg.Spec.ManagementPolicies = r
}

// GetProviderConfigReference of this NopResource.
func (mg *NopResource) GetProviderConfigReference() *xpv2.Reference {
	return mg.Spec.ProviderConfigReference
}

// SetProviderConfigReference of this NopResource.
func (mg *NopResource) SetProviderConfigReference(r *xpv2.Reference) {
	mg.Spec.ProviderConfigReference = r
}

// GetWriteConnectionSecretToReference of this NopResource.
func (mg *NopResource) GetWriteConnectionSecretToReference() *xpv2.SecretReference {
	return mg.Spec.WriteConnectionSecretToReference
}

// SetWriteConnectionSecretToReference of this NopResource.
func (mg *NopResource) SetWriteConnectionSecretToReference(r *xpv2.SecretReference) {
	mg.Spec.WriteConnectionSecretToReference = r
}

// SetObservedGeneration of this NopResource.
func (mg *NopResource) SetObservedGeneration(g int64) { mg.Status.SetObservedGeneration(g) }

// GetObservedGeneration of this NopResource.
func (mg *NopResource) GetObservedGeneration() int64 { return mg.Status.GetObservedGeneration() }

// GetItems of this NopResourceList, as crossplane-runtime's resource.LegacyManagedList asks.
func (l *NopResourceList) GetItems() []*NopResource {
	items := make([]*NopResource, len(l.Items))
	for i := range l.Items {
		items[i] = &l.Items[i]
	}
	return items
}

// Deep copies, written out (controller-gen is not part of this module).

// DeepCopyInto copies p into out.
func (p *NopResourceParameters) DeepCopyInto(out *NopResourceParameters) {
	*out = *p
	if p.ConditionAfter != nil {
		out.ConditionAfter = append([]ResourceConditionAfter(nil), p.ConditionAfter...)
	}
	if p.ConnectionDetails != nil {
		out.ConnectionDetails = append([]ResourceConnectionDetail(nil), p.ConnectionDetails...)
	}
	if p.Fields != nil {
		out.Fields = p.Fields.DeepCopy()
	}
}

// DeepCopyInto copies mg into out.
func (mg *NopResource) DeepCopyInto(out *NopResource) {
	*out = *mg
	out.TypeMeta = mg.TypeMeta
	mg.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	mg.Spec.ClusterManagedResourceSpec.DeepCopyInto(&out.Spec.ClusterManagedResourceSpec)
	mg.Spec.ForProvider.DeepCopyInto(&out.Spec.ForProvider)
	mg.Status.ManagedResourceStatus.DeepCopyInto(&out.Status.ManagedResourceStatus)
	if mg.Status.AtProvider.Fields != nil {
		out.Status.AtProvider.Fields = mg.Status.AtProvider.Fields.DeepCopy()
	}
}

// DeepCopyObject copies mg.
func (mg *NopResource) DeepCopyObject() runtime.Object {
	if mg == nil {
		return nil
	}
	out := new(NopResource)
	mg.DeepCopyInto(out)
	return out
}

// DeepCopyObject copies l.
func (l *NopResourceList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(NopResourceList)
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]NopResource, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// AddToScheme registers NopResource and its list.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NopResource{}, &NopResourceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
