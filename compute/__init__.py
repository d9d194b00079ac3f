"""compute"""
