package authz

// referenceTargets are the resource types the common R4 reference search
// parameters can point at, for _include and chains that do not name the
// target type (Observation:subject rather than Observation:subject:Patient).
// A parameter not listed reaches every type ("*"), so an include of it
// needs s on "*": the gate never guesses narrower than the data can be.
var referenceTargets = map[string][]string{
	"patient":               {"Patient"},
	"beneficiary":           {"Patient"},
	"subject":               {"Patient", "Group", "Device", "Location", "Organization", "Practitioner", "Medication", "Substance", "Procedure"},
	"encounter":             {"Encounter"},
	"context":               {"Encounter", "EpisodeOfCare"},
	"organization":          {"Organization"},
	"practitioner":          {"Practitioner"},
	"location":              {"Location"},
	"medication":            {"Medication"},
	"performer":             {"Practitioner", "PractitionerRole", "Organization", "CareTeam", "Patient", "RelatedPerson", "Device"},
	"requester":             {"Practitioner", "PractitionerRole", "Organization", "Patient", "RelatedPerson", "Device"},
	"author":                {"Practitioner", "PractitionerRole", "Organization", "Patient", "RelatedPerson", "Device"},
	"recorder":              {"Practitioner", "PractitionerRole", "Patient", "RelatedPerson"},
	"asserter":              {"Practitioner", "PractitionerRole", "Patient", "RelatedPerson"},
	"based-on":              {"ServiceRequest", "CarePlan", "MedicationRequest", "DeviceRequest", "ImmunizationRecommendation", "NutritionOrder"},
	"result":                {"Observation"},
	"specimen":              {"Specimen"},
	"has-member":            {"Observation", "QuestionnaireResponse", "MolecularSequence"},
	"derived-from":          {"Observation", "DocumentReference", "ImagingStudy", "Media", "QuestionnaireResponse", "MolecularSequence"},
	"part-of":               {"Procedure", "Observation", "MedicationAdministration", "MedicationStatement", "MedicationDispense", "ImagingStudy", "Immunization"},
	"general-practitioner":  {"Practitioner", "PractitionerRole", "Organization"},
	"link":                  {"Patient", "RelatedPerson"},
	"questionnaire":         {"Questionnaire"},
	"service-provider":      {"Organization"},
	"participant":           {"Practitioner", "PractitionerRole", "RelatedPerson", "Patient", "Organization", "CareTeam"},
	"care-team":             {"CareTeam"},
	"condition":             {"Condition"},
	"goal":                  {"Goal"},
	"episode-of-care":       {"EpisodeOfCare"},
	"service-request":       {"ServiceRequest"},
	"managing-organization": {"Organization"},
}

// targetsOf returns the types a reference parameter reaches: the explicit
// target when given, else referenceTargets, else "*".
func targetsOf(param, explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	if t, ok := referenceTargets[param]; ok {
		return t
	}
	return []string{"*"}
}
