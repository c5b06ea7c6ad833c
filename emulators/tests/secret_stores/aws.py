"""Secrets Manager on the AWS emulator, driven by boto3: the provider's credentials make a secret (the
munge key) with its tags and resource policy; an instance whose role's policy allows GetSecretValue on the
secret reads it with the credentials its metadata service hands out, an instance whose role has no grant is
refused with AccessDeniedException; a resource policy naming the second role lets it read; the secret is
deleted without recovery. Prints one JSON summary; exits 1 with the problems on stderr.

    python aws.py --endpoint http://127.0.0.1:PORT
"""

import argparse
import base64
import json
import os
import sys
import urllib.request

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import boto3  # noqa: E402
import botocore.exceptions  # noqa: E402

REGION = "eu-west-3"


def admin(endpoint, route, body):
    req = urllib.request.Request(f"{endpoint}/_admin/{route}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())


def role_credentials(port, role):
    """The role's credentials, read as a host reads them from its metadata service (IMDSv2)."""
    base = f"http://127.0.0.1:{port}"
    token = urllib.request.urlopen(urllib.request.Request(
        f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})).read().decode()
    got = urllib.request.urlopen(urllib.request.Request(
        f"{base}/latest/meta-data/iam/security-credentials/{role}", headers={"X-aws-ec2-metadata-token": token})).read()
    return json.loads(got)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    a = p.parse_args()
    ep = a.endpoint
    problems = []
    summary = {"problems": problems}

    def expect(ok, what):
        if not ok:
            problems.append(what)

    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=REGION)
    sm = session.client("secretsmanager", endpoint_url=ep)
    ec2 = session.client("ec2", endpoint_url=ep)
    iam = session.client("iam", endpoint_url=ep)

    # The hosts' roles and instance profiles, made through moto's IAM (which the judge does not know).
    admin(ep, "conformance", {"judge": False})
    for name in ("granted", "ungranted"):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
        iam.create_instance_profile(InstanceProfileName=name)
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    admin(ep, "conformance", {"judge": True})

    key = os.urandom(1024)
    token = "b1d7d2c4-6a4e-4d0f-9a59-5d4b6a0a0001"
    made = sm.create_secret(Name="hpc/train/munge", SecretBinary=key, ClientRequestToken=token,
                            Description="Slurm munge key of cluster train",
                            Tags=[{"Key": "hpc:cluster", "Value": "train"}, {"Key": "hpc:owner", "Value": "m1"}])
    arn = made["ARN"]
    summary["arn"] = arn
    expect(made["VersionId"] == token, f"CreateSecret's VersionId {made['VersionId']}, not the ClientRequestToken {token}")
    # The same token and value again: the same secret, nothing new (a retry after a lost answer).
    again = sm.create_secret(Name="hpc/train/munge", SecretBinary=key, ClientRequestToken=token)
    expect(again["ARN"] == arn, f"a retried CreateSecret answered {again}")
    # The same token with another value, and another token for the same name: ResourceExistsException.
    for kwargs in ({"SecretBinary": b"other", "ClientRequestToken": token},
                   {"SecretBinary": key, "ClientRequestToken": "b1d7d2c4-6a4e-4d0f-9a59-5d4b6a0a0002"}):
        try:
            sm.create_secret(Name="hpc/train/munge", **kwargs)
            problems.append(f"CreateSecret of an existing name with {sorted(kwargs)} was accepted")
        except botocore.exceptions.ClientError as e:
            expect(e.response["Error"]["Code"] == "ResourceExistsException", f"CreateSecret again: {e}")
    sm.create_secret(Name="hpc/other/munge", SecretString="not ours", Tags=[{"Key": "hpc:cluster", "Value": "other"}])
    sm.tag_resource(SecretId=arn, Tags=[{"Key": "hpc:role", "Value": "munge"}])

    described = sm.describe_secret(SecretId="hpc/train/munge")
    tags = {t["Key"]: t["Value"] for t in described.get("Tags", [])}
    expect(tags == {"hpc:cluster": "train", "hpc:owner": "m1", "hpc:role": "munge"}, f"DescribeSecret tags {tags}")
    listed = sm.list_secrets(Filters=[{"Key": "tag-key", "Values": ["hpc:cluster"]}, {"Key": "tag-value", "Values": ["train"]}])
    expect([s["Name"] for s in listed["SecretList"]] == ["hpc/train/munge"], f"ListSecrets by tag: {listed['SecretList']}")
    expect(sm.get_secret_value(SecretId=arn)["SecretBinary"] == key, "the admin's GetSecretValue is not the key")

    # Two hosts: one whose role may read the secret, one whose role may not.
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.61.1.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    admin(ep, "conformance", {"judge": False})
    iam.put_role_policy(RoleName="granted", PolicyName="munge", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": arn}]}))
    # A policy with a condition is not understood, so it grants nothing.
    iam.put_role_policy(RoleName="ungranted", PolicyName="conditional", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "secretsmanager:*", "Resource": "*",
                                               "Condition": {"StringEquals": {"aws:ResourceTag/hpc:cluster": "train"}}}]}))
    admin(ep, "conformance", {"judge": True})
    hosts = {}
    for name in ("granted", "ungranted"):
        instance = ec2.run_instances(ImageId="ami-12c6146b", InstanceType="t3.micro", MinCount=1, MaxCount=1, SubnetId=subnet,
                                     IamInstanceProfile={"Name": name})["Instances"][0]["InstanceId"]
        port = admin(ep, "metadata", {"instance": instance})["port"]
        c = role_credentials(port, name)
        hosts[name] = boto3.session.Session(aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                                            aws_session_token=c["Token"], region_name=REGION).client("secretsmanager", endpoint_url=ep)

    got = hosts["granted"].get_secret_value(SecretId=arn)
    expect(got["SecretBinary"] == key, "the granted host read another value")
    expect(got["ARN"] == arn and got["VersionStages"] == ["AWSCURRENT"], f"GetSecretValue answered {got}")
    summary["granted_read"] = got["SecretBinary"] == key

    def denied(client, what, **kwargs):
        try:
            getattr(client, what)(**kwargs)
            return None
        except botocore.exceptions.ClientError as e:
            return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Message"]

    # The granted role may read, and nothing else.
    summary["granted_other_secret"] = denied(hosts["granted"], "get_secret_value", SecretId="hpc/other/munge")
    summary["granted_describe"] = denied(hosts["granted"], "describe_secret", SecretId=arn)
    summary["ungranted_read"] = denied(hosts["ungranted"], "get_secret_value", SecretId=arn)

    # The secret's resource policy grants the second role.
    ungranted_arn = "arn:aws:iam::123456789012:role/ungranted"
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ungranted_arn},
                                                      "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]}
    sm.put_resource_policy(SecretId=arn, ResourcePolicy=json.dumps(policy))
    expect(json.loads(sm.get_resource_policy(SecretId=arn)["ResourcePolicy"]) == policy, "GetResourcePolicy is not what was put")
    summary["ungranted_read_by_resource_policy"] = denied(hosts["ungranted"], "get_secret_value", SecretId=arn)
    # ... unless a statement denies it.
    policy["Statement"].append({"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "secretsmanager:*", "Resource": "*"})
    sm.put_resource_policy(SecretId=arn, ResourcePolicy=json.dumps(policy))
    summary["granted_read_after_deny"] = denied(hosts["granted"], "get_secret_value", SecretId=arn)

    for name in ("hpc/train/munge", "hpc/other/munge"):
        deleted = sm.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
        expect(deleted["Name"] == name, f"DeleteSecret answered {deleted}")
    summary["after_delete"] = denied(sm, "get_secret_value", SecretId=arn)
    expect(summary["after_delete"][:2] == ("ResourceNotFoundException", 400), f"GetSecretValue after the delete: {summary['after_delete']}")
    print(json.dumps(summary, indent=1, default=str))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
