"""netcosim"""
